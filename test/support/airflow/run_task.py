"""Runs one task of a DAG file as Airflow 2's `airflow tasks run` runs it on a worker, on the stand-in modules beside it.

    run_task.py DAG_FILE DAG_ID TASK_ID DS RESULT_JSON [BASE_URL]

What it reproduces of Airflow 2.x (the paths are Airflow's source files):
- The supervisor (jobs/local_task_job_runner.py) forks the task's process
  (task/task_runner/standard_task_runner.py, _start_by_fork), which makes a process group of its own
  (utils/process_utils.py, set_new_process_group): the processes it starts are in that group.
- A task is killed (marked failed or cleared, its worker shutting down, a KubernetesExecutor pod deleted)
  through the supervisor: SIGTERM to it, whose handler terminates the task runner with reap_process_group
  (utils/process_utils.py): SIGTERM to the task's whole process group, up to [core]
  killed_task_cleanup_time (60 s; AIRFLOW__CORE__KILLED_TASK_CLEANUP_TIME) for it to empty, then SIGKILL
  to the group.
- The task's process (models/taskinstance.py, _execute_task_with_callbacks) installs a SIGTERM handler that
  logs "Received SIGTERM. Terminating subprocesses.", calls the operator's on_kill() and raises
  AirflowTaskTerminated, a BaseException, in whatever Python code runs at that moment: a subprocess.call
  waiting for its child then SIGKILLs the child (its `except: p.kill(); raise`).
- Before execute, the operator's template fields are rendered: {{ ds }} and {{ macros.ds_add(ds, N) }},
  the two the DAG uses (anything else is refused, so a new one is noticed, not passed through).
- How the task ended, as TaskInstance._run_raw_task decides, written to RESULT_JSON with the error's class
  and message: "success" (its return value, pushed to XCom, as "xcom"), "skipped" (AirflowSkipException),
  "failed" (AirflowFailException, or no retries left), else "up_for_retry" (AirflowException,
  AirflowTaskTerminated or any other error, while retries remain).

BASE_URL, when given, replaces the DAG's `BASE_URL = "..."` line: the one site setting a test must change.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import signal
import sys
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from airflow import DAG  # noqa: E402
from airflow.exceptions import AirflowFailException, AirflowSkipException, AirflowTaskTerminated  # noqa: E402

CLEANUP_TIME_S = float(os.environ.get("AIRFLOW__CORE__KILLED_TASK_CLEANUP_TIME", "60"))


def log(message: str) -> None:
    print(f"[airflow stand-in] {message}", file=sys.stderr, flush=True)


def load_dag_module(path: str, base_url: str | None) -> types.ModuleType:
    with open(path, encoding="utf-8") as f:
        source = f.read()
    if base_url is not None:
        source, count = re.subn(r'^BASE_URL = "[^"]*"$', f"BASE_URL = {json.dumps(base_url)}", source, flags=re.M)
        if count != 1:
            raise SystemExit(f'{path}: no line `BASE_URL = "..."` to point at {base_url}')
    module = types.ModuleType("airflow_dag")
    module.__file__ = path
    sys.modules["airflow_dag"] = module
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def find_task(module: types.ModuleType, dag_id: str, task_id: str):
    for value in vars(module).values():
        if isinstance(value, DAG) and value.dag_id == dag_id:
            if task_id not in value.tasks:
                raise SystemExit(f"DAG {dag_id} has no task {task_id} (it has {', '.join(value.tasks)})")
            return value.tasks[task_id]
    raise SystemExit(f"no DAG {dag_id} in {module.__file__}")


TEMPLATE = re.compile(r"\{\{\s*(.*?)\s*\}\}")


def render(value, ds: str):
    if isinstance(value, str):

        def one(match: re.Match) -> str:
            expression = match.group(1)
            if expression == "ds":
                return ds
            days = re.fullmatch(r"macros\.ds_add\(ds,\s*(-?\d+)\)", expression)
            if days:
                return (datetime.date.fromisoformat(ds) + datetime.timedelta(days=int(days.group(1)))).isoformat()
            raise ValueError(f"a template the stand-in does not render: {match.group(0)}")

        return TEMPLATE.sub(one, value)
    if isinstance(value, list):
        return [render(v, ds) for v in value]
    if isinstance(value, dict):
        return {k: render(v, ds) for k, v in value.items()}
    return value


def run_raw_task(task, ds: str) -> dict:
    """The task's process: the SIGTERM handler of _execute_task_with_callbacks, templates, execute, its end."""
    parent_pid = os.getpid()

    def signal_handler(signum, frame):
        if os.getpid() != parent_pid:
            os._exit(1)
        log("ERROR - Received SIGTERM. Terminating subprocesses.")
        task.on_kill()
        raise AirflowTaskTerminated("Task received SIGTERM signal")

    signal.signal(signal.SIGTERM, signal_handler)
    for field in task.template_fields:
        setattr(task, field, render(getattr(task, field), ds))
    context = {"ds": ds, "dag": task.dag, "task": task, "run_id": f"scheduled__{ds}T02:30:00+00:00"}
    try:
        return {"state": "success", "xcom": task.execute(context)}
    except AirflowSkipException as error:
        return {"state": "skipped", "error": f"{type(error).__name__}: {error}"}
    except AirflowFailException as error:
        return {"state": "failed", "error": f"{type(error).__name__}: {error}"}
    except BaseException as error:
        traceback.print_exc()
        return {"state": "up_for_retry" if task.retries > 0 else "failed", "error": f"{type(error).__name__}: {error}"}


def main() -> None:
    dag_file, dag_id, task_id, ds, result_path, *rest = sys.argv[1:]
    task = find_task(load_dag_module(dag_file, rest[0] if rest else None), dag_id, task_id)
    task_pid = os.fork()
    if task_pid == 0:
        os.setpgid(0, 0)
        outcome = run_raw_task(task, ds)
        with open(result_path, "w", encoding="utf-8") as f:
            json.dump(outcome, f)
        log(f"task {task_id} ended {outcome['state']}")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0 if outcome["state"] == "success" else 1)

    ended: list[int] = []

    def wait_task(flags: int) -> bool:
        if not ended:
            try:
                pid, status = os.waitpid(task_pid, flags)
            except ChildProcessError:
                # Reaped already, by the other caller (the signal handler ran inside the main wait).
                return bool(ended)
            if pid == task_pid:
                ended.append(status)
        return bool(ended)

    def reap_process_group(signum, frame) -> None:
        log("ERROR - Received SIGTERM. Terminating subprocesses")
        log(f"Sending Signals.SIGTERM to group {task_pid}")
        os.killpg(task_pid, signal.SIGTERM)
        deadline = time.monotonic() + CLEANUP_TIME_S
        while time.monotonic() < deadline:
            wait_task(os.WNOHANG)
            try:
                os.killpg(task_pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        log(f"processes of group {task_pid} did not respond to SIGTERM. Trying SIGKILL")
        os.killpg(task_pid, signal.SIGKILL)

    signal.signal(signal.SIGTERM, reap_process_group)
    wait_task(0)
    status = ended[0]
    if os.WIFSIGNALED(status) or not os.path.exists(result_path):
        with open(result_path, "w", encoding="utf-8") as f:
            json.dump({"state": "up_for_retry", "error": f"the task's process died (wait status {status})"}, f)
    sys.exit(0)


if __name__ == "__main__":
    main()
