/**
 * Runs a command line as written where it names machine paths that are not
 * here (/var/lib/typed-eval, /airflow/xcom, /state): in a private mount
 * namespace whose root is this machine's filesystem with temporary folders
 * mounted at those paths. Nothing outside the namespace changes; it needs
 * root and `unshare` (CI and these machines have both). Without them
 * `canUnshare` is false and the caller skips, loudly.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, sep } from "node:path";

/** Where a tool is, looked up on a root's PATH: the command's own PATH may lack /usr/sbin (cron's does). */
const tool = (name: string) =>
  spawnSync("/bin/sh", ["-c", `command -v ${name}`], {
    env: { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" },
    encoding: "utf8",
  }).stdout.trim();
const [MOUNT, CHROOT] = [tool("mount"), tool("chroot")];

/** Whether a private mount namespace can be made here. */
export const canUnshare: boolean =
  process.platform === "linux" &&
  MOUNT !== "" &&
  CHROOT !== "" &&
  spawnSync("unshare", ["--mount", "--propagation", "private", "true"], { stdio: "ignore" }).status === 0;

export interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Single-quotes a word for /bin/sh. */
const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;
/** A path as fstab writes it (octal escapes for blanks and backslashes). */
const fstabPath = (path: string) => path.replace(/[\\ \t\n]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`);

/**
 * Lays out `root` as this machine's "/" seen through bind mounts, with each
 * of `binds` (an absolute path there: a folder or file here) mounted on top;
 * returns the mounts as fstab lines, in order. A folder that must gain a new entry is built
 * entry by entry (each bound from the machine's), so nothing is created on
 * the machine itself.
 */
function layout(root: string, binds: Record<string, string>): string[] {
  const mounts: string[] = [];
  const targets = Object.keys(binds).map((t) => t.split(sep).filter(Boolean));
  // Folders of the machine to rebuild: "/" and every existing ancestor of a target.
  const rebuilt = new Set<string>(["/"]);
  for (const parts of targets) {
    for (let i = 1; i < parts.length; i++) {
      const path = `/${parts.slice(0, i).join("/")}`;
      if (existsSync(path) && lstatSync(path).isDirectory()) rebuilt.add(path);
    }
  }
  const bindTargets = new Set(Object.keys(binds));
  const visit = (path: string) => {
    const here = join(root, path);
    mkdirSync(here, { recursive: true });
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const from = join(path, entry.name);
      const to = join(root, from);
      if (bindTargets.has(from)) continue;
      if (rebuilt.has(from)) visit(from);
      else if (entry.isSymbolicLink()) symlinkSync(readlinkSync(from), to);
      else if (entry.isDirectory()) {
        mkdirSync(to);
        mounts.push(`${fstabPath(from)} ${fstabPath(to)} none rbind 0 0`);
      } else {
        writeFileSync(to, "");
        mounts.push(`${fstabPath(from)} ${fstabPath(to)} none bind 0 0`);
      }
    }
  };
  visit("/");
  for (const [target, source] of Object.entries(binds)) {
    const to = join(root, target);
    mkdirSync(dirname(to), { recursive: true });
    if (lstatSync(source).isDirectory()) mkdirSync(to, { recursive: true });
    else writeFileSync(to, "");
    mounts.push(`${fstabPath(source)} ${fstabPath(to)} none bind 0 0`);
  }
  return mounts;
}

/**
 * Runs `argv` (its first word found on `env.PATH`) in `cwd`, in a mount namespace where each of `binds` is mounted at its path.
 * `onStart` gets the pid that becomes `argv`'s process (the setup execs into it), to signal it as its scheduler would.
 */
export function runMounted(
  binds: Record<string, string>,
  argv: string[],
  options: { cwd: string; env: Record<string, string | undefined>; onStart?: (pid: number) => void },
): Promise<Result> {
  const work = mkdtempSync(join(tmpdir(), "te-root-"));
  const root = join(work, "root");
  // One mount(8) for them all (a process per mount took a second for the couple of hundred a root needs).
  writeFileSync(join(work, "fstab"), `${layout(root, binds).join("\n")}\n`);
  const script = `${MOUNT} --all --fstab ${quote(join(work, "fstab"))} && exec ${CHROOT} ${quote(root)} /bin/sh -c 'cd "$0" && exec "$@"' ${[options.cwd, ...argv].map(quote).join(" ")}`;
  return new Promise((resolve) => {
    const child = spawn("unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", script], { env: options.env, stdio: ["ignore", "pipe", "pipe"] });
    if (child.pid !== undefined) options.onStart?.(child.pid);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("exit", (code) => {
      // The mounts lived in the namespace, gone with its last process: what is left here is empty folders and files.
      rmSync(work, { recursive: true, force: true });
      resolve({ code, stdout, stderr });
    });
  });
}
