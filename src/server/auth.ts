/**
 * Bearer auth for the routes of the context that registers it: every
 * request's key is checked against the accounts in force at that moment
 * (nothing is kept per connection, so a key revoked or expired while a
 * keep-alive connection is open is refused on its next request).
 */
import { AuthenticationError } from "../api/errors.js";
import type { Account, Accounts } from "./accounts.js";
import { shared } from "./plugin.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated account (set on the routes behind auth). */
    account: Account | undefined;
  }
}

function bearerKey(header: string | undefined): string {
  if (!header) throw new AuthenticationError("Missing API key: send the header `Authorization: Bearer <API key>`");
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) throw new AuthenticationError("Malformed Authorization header: expected `Bearer <API key>`");
  return match[1] as string;
}

/** An onRequest hook that sets `request.account`, or answers 401. */
export const authPlugin = shared<{ accounts: Accounts }>((app, { accounts }, done) => {
  app.decorateRequest("account", undefined);
  app.addHook("onRequest", (request, _reply, next) => {
    let result: ReturnType<Accounts["check"]>;
    try {
      result = accounts.check(bearerKey(request.headers.authorization));
    } catch (error) {
      next(error as Error);
      return;
    }
    // A refused key of a known account is logged with it: who still sends a revoked or expired key.
    if (result.account) request.info.account = result.account.name;
    if (result.keyId !== undefined) request.info.keyId = result.keyId;
    if (!result.ok) {
      next(new AuthenticationError(result.reason));
      return;
    }
    request.account = result.account;
    next();
  });
  done();
});
