/**
 * A single-node Ceph cluster serving S3 on loopback, from Debian's packages
 * (`apt-get install -y radosgw ceph-mon ceph-osd ceph-common`): one monitor,
 * one OSD keeping its objects in memory (memstore), and the RADOS Gateway
 * (radosgw, the S3 front end), with one user. It is the real S3
 * implementation the tests run against: s3rver ignores conditional requests.
 *
 * Every port is free when picked (the monitor's, the OSD's messenger range,
 * the gateway's), so several checkouts can run their tests at once; every
 * file goes under one folder; the daemons run in the foreground as children,
 * so their ids are known and `stop` ends exactly them. A watchdog ends them
 * too when the process that started them dies without stopping them (vitest
 * killed).
 *
 * Started in about 2-3 s on 2 cores: no `ceph` command (Python) is run. The
 * keys are written into the monitor's first keyring, the OSD is in the
 * first OSD map (`osdmaptool --createsimple 1`), and Paxos proposes at once
 * instead of every second, which made each pool the gateway creates cost a
 * second.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The programs the cluster needs, and the Debian packages that hold them. */
export const CEPH_PROGRAMS = ["ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "osdmaptool"] as const;
export const CEPH_PACKAGES = "radosgw ceph-mon ceph-osd ceph-common";

/** The programs of `CEPH_PROGRAMS` not found on PATH (or in /usr/sbin, /usr/bin). */
export function missingCephPrograms(): string[] {
  const dirs = [...(process.env["PATH"] ?? "").split(delimiter), "/usr/sbin", "/usr/bin"].filter(Boolean);
  return CEPH_PROGRAMS.filter((name) => !dirs.some((dir) => existsSync(join(dir, name))));
}

/** What a client needs to reach the gateway, and what a test needs to manage the cluster. */
export interface CephRgw {
  /** `http://127.0.0.1:<port>`: AWS_ENDPOINT_URL_S3. */
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** The cluster's ceph.conf: `radosgw-admin -c <conf>` manages users. */
  conf: string;
  /** Seconds from the first command to the gateway answering, and to the user made. */
  startedIn: number;
}

/** A port free on 127.0.0.1 at this moment. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** `count` consecutive ports free at this moment, at a random place (the OSD binds four of them, the first free ones in its range). */
async function freeRange(count: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 30_000);
    let all = true;
    for (let port = base; all && port < base + count; port++) all = await bindable(port);
    if (all) return base;
  }
  throw new Error(`no ${count} consecutive free ports on 127.0.0.1`);
}

/** A cephx key as `ceph-authtool --gen-print-key` writes it: type AES, creation time, 16 random bytes. */
function cephKey(): string {
  const key = Buffer.alloc(2 + 8 + 2 + 16);
  key.writeUInt16LE(1, 0);
  key.writeUInt32LE(Math.floor(Date.now() / 1000), 2);
  key.writeUInt16LE(16, 10);
  randomBytes(16).copy(key, 12);
  return key.toString("base64");
}

function keyring(entries: Record<string, Record<string, string>>): string {
  return Object.entries(entries)
    .map(
      ([name, caps]) =>
        `[${name}]\n\tkey = ${cephKey()}\n${Object.entries(caps)
          .map(([on, cap]) => `\tcaps ${on} = "${cap}"\n`)
          .join("")}`,
    )
    .join("");
}

function config(dir: string, fsid: string, ports: { mon: number; msgr: number; gateway: number }): string {
  return `[global]
fsid = ${fsid}
mon host = v2:127.0.0.1:${ports.mon}
public network = 127.0.0.0/8
keyring = ${dir}/keyring
run dir = ${dir}/run
admin socket = ${dir}/run/$cluster-$name.asok
log file = ${dir}/log/$cluster-$name.log
ms bind port min = ${ports.msgr}
ms bind port max = ${ports.msgr + 19}
ms bind msgr1 = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon max pg per osd = 1000
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = 2147483648
mon data avail warn = 1
mon data avail crit = 0
paxos propose interval = 0.01
paxos min wait = 0.001
[mon.a]
mon data = ${dir}/mon
[osd.0]
osd data = ${dir}/osd
[client.rgw.gw]
rgw frontends = beast endpoint=127.0.0.1:${ports.gateway}
rgw data = ${dir}/rgw
`;
}

/** The last lines of each daemon's log: what a failed start says about itself. */
export function logTails(dir: string, lines = 15): string {
  const logs = join(dir, "log");
  if (!existsSync(logs)) return "(no logs)";
  return ["ceph-mon.a", "ceph-osd.0", "ceph-client.rgw.gw"]
    .map((name) => {
      const path = join(logs, `${name}.log`);
      const text = existsSync(path) ? readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n") : "(none)";
      return `--- ${name}.log\n${text}`;
    })
    .join("\n");
}

/** The daemons of one cluster: started in the foreground, ended by their ids. */
export class CephDaemons {
  private readonly children: ChildProcess[] = [];
  private watchdog: ChildProcess | undefined;

  constructor(readonly dir: string) {}

  /** Starts `program` in the foreground; its id goes to `<dir>/pids` for the watchdog. */
  spawn(program: string, args: string[]): ChildProcess {
    const child = spawn(program, [...args, "-f"], { stdio: "ignore" });
    child.unref();
    this.children.push(child);
    writeFileSync(join(this.dir, "pids"), `${this.children.map((c) => c.pid).join(" ")}\n`);
    this.watch();
    return child;
  }

  /**
   * A shell that waits for this process to end and then kills the daemons
   * still running under this cluster's config (each id checked against its
   * command line, so an id reused meanwhile is left alone), and removes the
   * folder. `stop` removes `<dir>/pids` first, which ends the watchdog.
   */
  private watch(): void {
    if (this.watchdog) return;
    const script = `
      while kill -0 "$0" 2>/dev/null && [ -e "$1/pids" ]; do sleep 1; done
      [ -e "$1/pids" ] || exit 0
      for pid in $(cat "$1/pids"); do
        grep -qF "$1/ceph.conf" "/proc/$pid/cmdline" 2>/dev/null && kill -9 "$pid"
      done
      rm -rf "$1"`;
    this.watchdog = spawn("bash", ["-c", script, String(process.pid), this.dir], { stdio: "ignore", detached: true });
    this.watchdog.unref();
  }

  /** Kills every daemon still running (memstore keeps nothing worth a clean shutdown; radosgw takes seconds to end on SIGTERM). */
  async stop(): Promise<void> {
    const pids = join(this.dir, "pids");
    if (existsSync(pids)) writeFileSync(pids, "");
    const ends = this.children.map(
      (child) => new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve()))),
    );
    for (const child of this.children) child.kill("SIGKILL");
    // The children are unreferenced: without a timer of its own the process could end before their exits are seen.
    const hold = setInterval(() => undefined, 1_000);
    await Promise.all(ends).finally(() => clearInterval(hold));
    this.children.length = 0;
  }
}

/** Polls `ready` every 100 ms until it holds, or fails naming `what` after `timeoutMs` or when `died` has a reason. */
async function until(what: string, ready: () => Promise<boolean>, died: () => string | undefined, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const dead = died();
    if (dead) throw new Error(`${what}: ${dead}`);
    if (await ready().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Why a daemon is not running, if it exited. */
function exited(child: ChildProcess, name: string): string | undefined {
  if (child.exitCode === null && child.signalCode === null) return undefined;
  return `${name} exited (${child.exitCode ?? child.signalCode})`;
}

/** Awaits `work`, failing at once when `down` says a daemon it needs has exited. */
async function whileUp<T>(what: string, work: Promise<T>, down: () => string | undefined): Promise<T> {
  const settled = work.then(
    () => true,
    () => true,
  );
  while (!(await Promise.race([settled, new Promise<false>((resolve) => setTimeout(() => resolve(false), 100))]))) {
    const dead = down();
    if (dead) {
      work.catch(() => undefined);
      throw new Error(`${what}: ${dead}`);
    }
  }
  return work;
}

/**
 * Creates and starts a cluster under `dir` (an empty folder): the monitor,
 * the OSD, a user, then the gateway; resolves once the gateway answers HTTP.
 * On failure the daemons started are left to `daemons.stop()`.
 */
export async function startCephRgw(dir: string, daemons: CephDaemons, timeoutMs = 90_000): Promise<CephRgw> {
  const started = performance.now();
  for (const sub of ["mon", "osd", "rgw", "run", "log"]) mkdirSync(join(dir, sub), { recursive: true });
  const ports = { mon: await freePort(), msgr: await freeRange(20), gateway: await freePort() };
  const fsid = randomUUID();
  const conf = join(dir, "ceph.conf");
  writeFileSync(conf, config(dir, fsid, ports));
  writeFileSync(
    join(dir, "keyring"),
    keyring({
      "mon.": { mon: "allow *" },
      "client.admin": { mon: "allow *", osd: "allow *", mgr: "allow *" },
      "osd.0": { mon: "allow profile osd", osd: "allow *", mgr: "allow profile osd" },
      "client.rgw.gw": { mon: "allow rw", osd: "allow rwx", mgr: "allow rw" },
    }),
  );
  const c = ["-c", conf];
  await run("monmaptool", ["--create", "--addv", "a", `[v2:127.0.0.1:${ports.mon}]`, "--fsid", fsid, join(dir, "monmap")]);
  await run("osdmaptool", ["--createsimple", "1", "--clobber", join(dir, "osdmap")]);
  await run("ceph-mon", [...c, "--mkfs", "-i", "a", "--monmap", join(dir, "monmap"), "--osdmap", join(dir, "osdmap"), "--keyring", join(dir, "keyring")]);
  const mon = daemons.spawn("ceph-mon", [...c, "-i", "a"]);
  await run("ceph-osd", [...c, "-i", "0", "--mkfs", "--osd-uuid", randomUUID()]);
  const osd = daemons.spawn("ceph-osd", [...c, "-i", "0"]);
  const down = () => exited(mon, "ceph-mon") ?? exited(osd, "ceph-osd");
  // radosgw-admin waits for the monitor and the OSD, and makes the zone and its pools the gateway then finds.
  const user = await whileUp("creating the user", addCephUser(conf, "tester", timeoutMs), down);
  const gateway = daemons.spawn("radosgw", [...c, "-n", "client.rgw.gw"]);
  const endpoint = `http://127.0.0.1:${ports.gateway}`;
  await until(
    `radosgw on ${endpoint}`,
    async () => (await fetch(endpoint, { signal: AbortSignal.timeout(2_000) })).status > 0,
    () => down() ?? exited(gateway, "radosgw"),
    timeoutMs,
  );
  return { endpoint, ...user, conf, startedIn: (performance.now() - started) / 1000 };
}

/** Adds a user to the cluster (`radosgw-admin user create`): credentials the store knows, with no right to other users' buckets. */
export async function addCephUser(conf: string, uid: string, timeoutMs = 60_000): Promise<{ accessKeyId: string; secretAccessKey: string }> {
  const accessKeyId = `TE${randomBytes(9).toString("hex").toUpperCase()}`;
  const secretAccessKey = randomBytes(24).toString("base64url");
  const args = ["user", "create", `--uid=${uid}`, `--display-name=${uid}`, `--access-key=${accessKeyId}`, `--secret=${secretAccessKey}`];
  await run("radosgw-admin", ["-c", conf, ...args], { timeout: timeoutMs });
  return { accessKeyId, secretAccessKey };
}
