import { status as GrpcStatus } from "@grpc/grpc-js";

/** The name of a gRPC status code, e.g. "UNAVAILABLE". */
export function codeName(code: number): string {
  const name = (GrpcStatus as unknown as Record<number, string>)[code];
  return typeof name === "string" ? name : `CODE_${code}`;
}

/**
 * An error of a convstate call, or of input refused before any call was
 * made (then `local` is true and the code is INVALID_ARGUMENT). `code` is
 * the gRPC status code (`@grpc/grpc-js`'s `status` enum).
 */
export class ConvstateError extends Error {
  readonly code: number;
  readonly codeName: string;
  readonly details: string;
  /** The RPC that failed, e.g. "AppendTurn"; empty for local errors. */
  readonly method: string;
  readonly local: boolean;

  constructor(code: number, details: string, method = "", local = false) {
    super(method ? `${method}: ${codeName(code)}: ${details}` : `${codeName(code)}: ${details}`);
    this.name = "ConvstateError";
    this.code = code;
    this.codeName = codeName(code);
    this.details = details;
    this.method = method;
    this.local = local;
  }
}

/** Input the library refuses before calling the service. */
export function invalidInput(details: string): ConvstateError {
  return new ConvstateError(GrpcStatus.INVALID_ARGUMENT, details, "", true);
}

/** Valid UTF-8 once encoded: no lone surrogate halves. */
export function isWellFormed(s: string): boolean {
  const f = (s as unknown as { isWellFormed?: () => boolean }).isWellFormed;
  if (typeof f === "function") return f.call(s);
  return !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
}

/** Throws a local INVALID_ARGUMENT naming `where` unless `s` is a string that encodes as UTF-8. */
export function checkText(s: unknown, where: string): string {
  if (typeof s !== "string") throw invalidInput(`${where}: expected a string`);
  if (!isWellFormed(s)) throw invalidInput(`${where}: not valid UTF-8 (a lone UTF-16 surrogate)`);
  return s;
}
