/** Waiting on a file another process writes: woken by the file system's change events, not by a timer. */
import type { ChildProcess } from "node:child_process";
import { existsSync, readFileSync, watch } from "node:fs";
import { basename, dirname } from "node:path";

/**
 * Resolves "ready" as soon as `ready(text)` holds for the file's text (checked
 * at once and on every change in its folder), or "exited" if `child` exits
 * first: a caller that kills the child at that moment can tell whether it did.
 */
export function whenFile(path: string, ready: (text: string) => boolean, child: ChildProcess): Promise<"ready" | "exited"> {
  return new Promise((resolve) => {
    const name = basename(path);
    const check = () => existsSync(path) && ready(readFileSync(path, "utf8"));
    const done = (how: "ready" | "exited") => {
      watcher.close();
      child.off("exit", onExit);
      resolve(how);
    };
    const onExit = () => done(check() ? "ready" : "exited");
    // The folder is watched, not the file: the file may not exist yet.
    const watcher = watch(dirname(path), (_event, changed) => {
      if ((changed === null || changed === name) && check()) done("ready");
    });
    child.on("exit", onExit);
    if (check()) done("ready");
  });
}
