/**
 * A fastify plugin is encapsulated: its hooks, handlers and decorations reach
 * only the routes it registers. One that serves the whole app (request ids,
 * errors, metrics, limits) is marked to skip that, which is all the
 * `fastify-plugin` package does for a plugin that needs no version check.
 */
import type { FastifyPluginCallback, FastifyPluginOptions } from "fastify";

/** Marks `plugin` to add its hooks and decorations to the app that registers it. */
export function shared<O extends FastifyPluginOptions>(plugin: FastifyPluginCallback<O>): FastifyPluginCallback<O> {
  return Object.assign(plugin, { [Symbol.for("skip-override")]: true });
}
