/**
 * CPU time of this process's threads, for the server benchmarks. Read from
 * /proc/self/task/<tid>/schedstat: nanoseconds on a CPU, exact, where
 * process.cpuUsage (getrusage) is sampled at scheduler ticks and drifts on a
 * crowded machine. Elsewhere than Linux it falls back to process.cpuUsage,
 * all of it counted as the main thread's.
 */
import { readdirSync, readFileSync } from "node:fs";

/** On-CPU ns by thread: "main", or the thread's name and id (libuv's pool, llama.cpp and V8's helpers are all "node"). */
export function threadCpu(): Map<string, number> {
  const byThread = new Map<string, number>();
  let tids: string[];
  try {
    tids = readdirSync("/proc/self/task");
  } catch {
    const { user, system } = process.cpuUsage();
    return byThread.set("main", (user + system) * 1000);
  }
  for (const tid of tids) {
    try {
      const ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      const name = tid === String(process.pid) ? "main" : `${readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim()} ${tid}`;
      byThread.set(name, ns);
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return byThread;
}

/**
 * Accumulates the CPU each thread spends between `start` and the returned
 * function's call, less what reading the counters costs the main thread
 * (measured once, on the first tally made).
 */
export class CpuTally {
  readonly byThread = new Map<string, number>();
  private static ownCostNs: number | undefined;

  constructor() {
    if (CpuTally.ownCostNs === undefined) {
      CpuTally.ownCostNs = 0;
      const probe = new CpuTally();
      for (let i = 0; i < 50; i++) probe.start()();
      CpuTally.ownCostNs = (probe.byThread.get("main") ?? 0) / 50;
    }
  }

  start(): () => void {
    const from = threadCpu();
    return () => {
      for (const [name, ns] of threadCpu()) this.byThread.set(name, (this.byThread.get(name) ?? 0) + ns - (from.get(name) ?? 0));
      this.byThread.set("main", (this.byThread.get("main") ?? 0) - (CpuTally.ownCostNs ?? 0));
    };
  }

  /** µs of the main thread and of all other threads together, per `calls`. */
  perCall(calls: number): { main: number; others: number } {
    let main = 0;
    let others = 0;
    for (const [name, ns] of this.byThread) {
      if (name === "main") main += ns;
      else others += ns;
    }
    return { main: main / calls / 1000, others: others / calls / 1000 };
  }
}
