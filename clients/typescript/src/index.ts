export * from "./client";
export * from "./errors";
export * from "./format";
export * from "./trace";
export * as v1 from "./gen/convstate/v1/convstate";
export { status as GrpcStatus } from "@grpc/grpc-js";
