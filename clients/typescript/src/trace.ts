// W3C Trace Context (traceparent) values: checked, created, and continued
// with a new parent id for the next hop.

import { randomBytes } from "node:crypto";

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** True for a traceparent a hop may continue (version 00..fe, ids not all zero). */
export function isValidTraceparent(value: string | undefined | null): value is string {
  if (typeof value !== "string") return false;
  const m = TRACEPARENT.exec(value.trim());
  if (!m) return false;
  const [, version, traceId, parentId] = m;
  if (version === "ff") return false;
  if (version === "00" && m[5] !== undefined) return false;
  return !/^0+$/.test(traceId) && !/^0+$/.test(parentId);
}

/** A new trace: random trace and parent ids, sampled. */
export function newTraceparent(): string {
  return `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01`;
}

/**
 * The traceparent for the next hop: the incoming trace (when valid) with a
 * new parent id, else a new trace.
 */
export function nextTraceparent(incoming?: string | null): string {
  if (!isValidTraceparent(incoming)) return newTraceparent();
  const m = TRACEPARENT.exec(incoming.trim())!;
  return `00-${m[2]}-${randomBytes(8).toString("hex")}-${m[4]}`;
}

/** The trace id of a traceparent, or "". */
export function traceIdOf(traceparent: string | undefined | null): string {
  const m = typeof traceparent === "string" ? TRACEPARENT.exec(traceparent.trim()) : null;
  return m ? m[2] : "";
}
