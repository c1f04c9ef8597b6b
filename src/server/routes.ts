/**
 * The routes: `POST /v1/systemone` and `GET /v1/models` behind auth (spec
 * sections 4-6), `/openapi.json` and the health checks without, and 405 with
 * `Allow` for another method on an API path.
 */
import type { FastifyInstance, FastifyPluginCallback, FastifyReply, FastifyRequest } from "fastify";
import { AuthenticationError, MethodNotAllowedError, PermissionDeniedError, UnprocessableEntityError, UpstreamUnavailableError } from "../api/errors.js";
import { buildOpenAPIDocument } from "../api/openapi.js";
import type { EvaluatorResponse, ModelMetadataList, SystemOneRequest, SystemOneResponse } from "../api/schema.js";
import { validateRequest } from "../api/validate.js";
import type { ModelSet } from "../evaluator/evaluator.js";
import { namesPromptFormat, PROMPT_FORMAT_HEADER } from "../api/prompt-format.js";
import type { Account, Accounts } from "./accounts.js";
import { authPlugin } from "./auth.js";
import type { ServerMetrics } from "./metrics.js";

export interface RoutesOptions {
  evaluator: ModelSet;
  accounts: Accounts;
  /** Where the tokens of answered requests are counted. */
  metrics: ServerMetrics;
  /** Ignore unknown keys inside questions, noul criteria keys other than true/false, images and videos. */
  lenient: boolean;
}

const V1_ROUTES: Record<string, string> = { "/v1/systemone": "POST", "/v1/models": "GET" };
const ALL_METHODS = ["DELETE", "GET", "HEAD", "PATCH", "POST", "PUT", "OPTIONS"] as const;

/** Whether `account` may use `model`, by any of the names of what it routes to. */
function allowed(evaluator: ModelSet, account: Account, model: string): boolean {
  if (account.models.includes("*")) return true;
  const target = evaluator.lookup(model);
  return account.models.some((name) => evaluator.lookup(name) === target);
}

/**
 * Label mass on request (`?x_label_mass=true` or the header `x-label-mass: true`), as SGLang's
 * `x_label_mass` field: off by default, so clients that pin the answers' exact keys are unaffected.
 */
function wantsLabelMass(request: FastifyRequest): boolean {
  const query = (request.query as Record<string, unknown> | undefined)?.["x_label_mass"];
  const header = request.headers["x-label-mass"];
  return [query, header].some((v) => typeof v === "string" && /^(1|true|yes)$/i.test(v));
}

/**
 * Each answer with `x_label_mass`: the share of the next-token distribution on its labels (when the model reports it).
 * The request was checked against the wire's types, so its answers are the wire's.
 */
function withLabelMass(response: EvaluatorResponse, mass: Record<string, number> | undefined): SystemOneResponse {
  if (!mass) return response as SystemOneResponse;
  const answers = Object.fromEntries(
    Object.entries(response.answers).map(([name, a]) => [name, mass[name] === undefined ? a : { ...a, x_label_mass: mass[name] }]),
  );
  return { ...response, answers: answers as SystemOneResponse["answers"] };
}

/** The checked body of a `POST /v1/systemone` its account may send, with what it did noted for the log; else 422 or 403. */
function checkedRequest(request: FastifyRequest, { evaluator, lenient }: RoutesOptions): SystemOneRequest {
  const account = request.account as Account;
  const checked = validateRequest(request.body, { lenient });
  if (!checked.ok) throw new UnprocessableEntityError(checked.errors);
  const body = checked.value;
  request.info.model = body.model;
  request.info.questions = Object.keys(body.questions).length;
  evaluator.route(body.model); // unknown model: 422 before any other check
  if (!allowed(evaluator, account, body.model)) throw new PermissionDeniedError(`Account ${account.name} may not use model '${body.model}'`);
  return body;
}

/** `POST /v1/systemone`: checked, admitted, evaluated (stopped if the client goes away). */
async function answer(app: FastifyInstance, options: RoutesOptions, request: FastifyRequest, reply: FastifyReply) {
  const body = checkedRequest(request, options);
  const account = request.account as Account;
  const tokens = options.evaluator.estimateInputTokens(body);
  request.info.inputTokens = tokens;
  const release = app.admission.admit(request, account, tokens);
  const abort = new AbortController();
  // The response closes early only when the client goes away: stop spending on its request.
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) abort.abort(new Error("client closed the connection"));
  });
  let used: number | undefined;
  try {
    const retry = request.info.retryCount ? { retryCount: Number(request.info.retryCount) || 0 } : {};
    const { response, labelMass, promptFormat } = await options.evaluator.evaluate(body, { signal: abort.signal, ...retry });
    used = response.usage.input_tokens;
    request.info.inputTokens = used;
    options.metrics.inputTokens.inc({ model: response.model }, used);
    options.metrics.outputTokens.inc({ model: response.model }, response.usage.output_tokens);
    // The wire has no field for it: a client that records provenance (typed-eval's remote evaluator) reads the header.
    if (promptFormat && namesPromptFormat(promptFormat)) reply.header(PROMPT_FORMAT_HEADER, promptFormat);
    return reply.send(wantsLabelMass(request) ? withLabelMass(response, labelMass) : response);
  } catch (error) {
    // An upstream that refuses this server's own credentials is a gateway failure, not the caller's.
    if (error instanceof AuthenticationError || error instanceof PermissionDeniedError) {
      throw new UpstreamUnavailableError(`the upstream endpoint refused this server's credentials: ${error.message}`);
    }
    throw error;
  } finally {
    release(used);
  }
}

/** The two routes of the API, in a context of their own behind the auth plugin. */
const apiRoutes: FastifyPluginCallback<RoutesOptions> = (api, options, done) => {
  api.register(authPlugin, { accounts: options.accounts });
  api.post("/v1/systemone", (request, reply) => answer(api, options, request, reply));
  api.get("/v1/models", async (request): Promise<ModelMetadataList> => {
    const account = request.account as Account;
    return { models: options.evaluator.models().filter((m) => allowed(options.evaluator, account, m.name)) };
  });
  done();
};

/** Every route of the app but `/metrics` (the metrics plugin's). */
export const routesPlugin: FastifyPluginCallback<RoutesOptions> = (app, options, done) => {
  app.register(apiRoutes, options);
  const openapi = buildOpenAPIDocument();
  app.get("/openapi.json", async () => openapi);
  // `/health` too: the path other servers of this API (llama.cpp, SGLang) answer on.
  for (const url of ["/healthz", "/health"]) app.get(url, async () => ({ status: "ok", in_flight: app.admission.inFlight }));
  for (const [url, method] of Object.entries(V1_ROUTES)) {
    const others = ALL_METHODS.filter((m) => m !== method && !(method === "GET" && m === "HEAD"));
    app.route({
      method: [...others],
      url,
      handler: async () => {
        throw new MethodNotAllowedError(`${url} accepts ${method} only`, [method]);
      },
    });
  }
  done();
};
