/** A full garbage collection on demand, for memory figures: V8 hands out `gc` once the flag is set, even at run time. */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

setFlagsFromString("--expose-gc");
export const gc = runInNewContext("gc") as () => void;
