/**
 * Argument types from the yargs builders: an option's name, type and default
 * are written once, in its builder, and the handler's argument type follows.
 */
import type { Argv } from "yargs";

/** The parsed arguments a builder function declares. */
export type ArgsOf<B extends (y: Argv<object>) => Argv<unknown>> = ReturnType<B> extends Argv<infer T> ? T : never;
