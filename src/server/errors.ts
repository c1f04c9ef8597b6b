/**
 * Every failure as JSON in the error classes' shapes: fastify's own errors
 * (content type, size, empty body) mapped onto them, unknown paths as 404,
 * and for a 5xx one log line with the message (the stack at debug level).
 */
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import {
  BadRequestError,
  InternalServerError,
  NotFoundError,
  PayloadTooLargeError,
  TypedEvalError,
  UnprocessableEntityError,
  UnsupportedMediaTypeError,
} from "../api/errors.js";
import type { Logger } from "../logging/logger.js";
import { shared } from "./plugin.js";

/** Maps fastify's own errors (parsing, content type, size) onto our error classes. */
function fromFastifyError(error: FastifyError): TypedEvalError {
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new UnsupportedMediaTypeError("Content-Type must be application/json");
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new PayloadTooLargeError(`${error.message}; split the request or send a smaller state`);
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new UnprocessableEntityError([{ type: "missing", loc: ["body"], msg: "Field required" }]);
    default:
      if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) return new BadRequestError(error.message);
      return new InternalServerError("internal error; the request id identifies it in the server log");
  }
}

/** The error handler and the 404 handler of the whole app. */
export const errorsPlugin = shared<{ logger: Logger }>((app, { logger }, done) => {
  app.setErrorHandler((error: FastifyError | TypedEvalError, request: FastifyRequest, reply: FastifyReply) => {
    if (reply.raw.destroyed) {
      logger.info({ requestId: request.id }, "client went away before the answer");
      return;
    }
    const mapped = error instanceof TypedEvalError ? error : fromFastifyError(error);
    if (mapped.status >= 500) {
      // One line for the operator; the stack is for a bug hunt, at debug level.
      logger.error({ requestId: request.id, status: mapped.status, error: `${error.name}: ${error.message}` }, "request failed");
      logger.debug({ requestId: request.id, err: error }, "request failed");
    }
    return reply.code(mapped.status).headers(mapped.headers()).type("application/json").send(mapped.body());
  });

  app.setNotFoundHandler((request, reply) => {
    const error = new NotFoundError(`No route ${request.method} ${request.url.split("?")[0]}; the API serves POST /v1/systemone and GET /v1/models`);
    return reply.code(404).type("application/json").send(error.body());
  });
  done();
});
