/** Root writes through any file mode: a permission case drops to `nobody` (effective ids) for its duration. */
export async function unprivileged<T>(fn: () => Promise<T>): Promise<T> {
  if (process.getuid?.() !== 0) return fn();
  const { seteuid, setegid } = process;
  // Present in a forked test worker (vitest's pool here), absent in worker threads.
  if (!seteuid || !setegid) throw new Error("running as root without seteuid: run these tests in a forked worker");
  setegid(65534);
  seteuid(65534);
  try {
    return await fn();
  } finally {
    seteuid(0);
    setegid(0);
  }
}
