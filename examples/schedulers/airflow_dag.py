"""Nightly typed-eval job, sharded over 4 tasks, each followed by a drift gate.

Two forms of the same job:

- ``triage_k8s``: KubernetesPodOperator, one pod per shard, from the image
  built by ``Dockerfile`` at the repository root. The API key comes from a
  Kubernetes secret. The summary goes to ``/airflow/xcom/return.json`` and on
  to XCom.
- ``triage_bash``: the CLI installed on the workers (``npm install -g``, so
  ``typed-eval`` is on the worker's PATH), called from a Python task that
  maps exit codes exactly. The key comes from an Airflow connection and is
  added to the worker's environment, never in place of it: PATH, HOME and
  the AWS credential chain (AWS_PROFILE, ~/.aws, the instance role's
  variables) pass through. (With a BashOperator instead, ``env=`` replaces
  the environment unless ``append_env=True``.)

The pod form passes only ``arguments``: the image's entrypoint (tini, then
``typed-eval``) stays, so tini is PID 1 and forwards SIGTERM to the runner.
Setting ``cmds`` would replace the entrypoint and drop tini. The operator
deletes the pod when it ends, before the task sees how it ended, so the exit
code is taken from the pod's final state as the operator hands it to
``cleanup`` (reading the pod afterwards gets a 404).

A killed task (marked failed or cleared, its worker shutting down, an
execution_timeout) stops typed-eval as a signal would: it finishes the
requests in flight within ``--grace`` (GRACE_S), journals them, writes its
summary and exits 143, resumable, so the retry pays for nothing twice. In
the pod form the operator's on_kill deletes the pod with
``termination_grace_period`` (60 s) and tini passes the SIGTERM on. In the
worker form Airflow 2 raises inside the task (its SIGTERM handler), which
would make a plain ``subprocess.call`` SIGKILL typed-eval at once: no grace,
no summary, the requests in flight paid again. ``typed_eval`` below runs it
in a session of its own and forwards the stop instead, waiting GRACE_S plus
STOP_MARGIN_S before it kills; keep Airflow's ``[core]
killed_task_cleanup_time`` (default 60 s, after which Airflow SIGKILLs the
task) above that sum.

The journal of an S3 output lives in S3 beside it (``<output>.journal/``), so
a retry on another worker or in a new pod resumes where the last one stopped:
a lost worker repays at most its last 5 seconds of records. Its lock is
taken over once its heartbeat has stood still for a minute (the retry
watches it that long); the first retry comes two minutes later.

``--job support-triage`` names the job bundled with the package: the same
argument works in the image and on a worker with the npm package.

Exit codes (docs/scheduling.md, "Exit codes"): only the resumable ones,
``RESUMABLE`` (3: endpoint down; 8: lock lost while stalled; 9: storage down; 10: input changed while
read; 130/143: stopped by a signal), and ``KILLED`` (137: killed outright, out of memory or kill -9,
no summary but the journal kept) are retried, with exponential backoff, as the Kubernetes
example does. 6 (no input tonight) skips. 1 (too many failed records), 2 (bad job or input), 5 (every
record fails: a wrong field or format), 7 (another run holds the journal) and 70 (a bug) fail at once:
retrying would not change them.
Output paths are partitioned by ``{{ ds }}``, so each night starts fresh and a
rerun of the same night resumes.

After each shard, a drift gate (``report --compare --fail-if``) sets the
shard's labels beside last night's and fails the task (exit 4, not retried)
when a DRIFT_GATE condition holds: whatever uses the labels runs downstream
of the gates, so a drifted night stops there. Its HTML report goes to the
worker's /var/lib/typed-eval (worker form) or stays in the pod, whose
task log shows the shares and what moved. The first night has no last night: its gates fail naming
the missing file; mark them successful by hand once the report is checked.

Airflow itself is not run by CI: these machines have neither Airflow nor
Kubernetes. test/examples/airflow.test.ts runs this file's tasks as written
on stand-ins for Airflow 2 and its Kubernetes provider that handle signals,
templates, pod deletion and task states as they do (test/support/airflow),
driving the real typed-eval: a worker task killed mid-run and retried, the
drift gates, typed-eval killed -9 in either form, a night without input, a
first night's gate. It mounts temporary folders at /airflow/xcom,
/var/lib/typed-eval and /state, against a local S3-compatible server holding
acme-support and a local endpoint (as BASE_URL) serving a generated model.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
from datetime import datetime, timedelta

from airflow import DAG
from airflow.exceptions import AirflowException, AirflowFailException, AirflowSkipException
from airflow.hooks.base import BaseHook
from airflow.operators.python import PythonOperator
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.providers.cncf.kubernetes.secret import Secret
from kubernetes.client import models as k8s

SHARDS = 4
RESUMABLE = {3, 8, 9, 10, 130, 143}
# 128 + SIGKILL: typed-eval killed outright (out of memory, kill -9), not one of its codes; its journal keeps
# what was finished (in S3: as of its last shipment), so a retry resumes: retried, as the Kubernetes example does.
KILLED = 137
NO_INPUT = 6
GATE_FAILED = 4
DRIFT_GATE = "team.psi>0.2,urgency.psi>0.2"
# A stopped run's time to finish the requests in flight (--grace), then to write its summary and release its lock.
GRACE_S = 30
STOP_MARGIN_S = 15
IMAGE = "registry.example.com/typed-eval:0.1.0"
BASE_URL = "https://api.example.com"
DEFAULTS = {
    "retries": 4,
    "retry_delay": timedelta(minutes=2),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=30),
}


# Both forms run nightly at 02:30 with the same retry policy.
NIGHTLY = {
    "start_date": datetime(2026, 11, 1),
    "schedule": "30 2 * * *",
    "catchup": False,
    "default_args": DEFAULTS,
}


def run_args(shard: int, ds: str) -> list[str]:
    return [
        "run", f"s3://acme-support/tickets/{ds}/",
        "--job", "support-triage",
        "--shard", f"{shard}/{SHARDS}",
        "--output", f"s3://acme-support/answers/{ds}/part-{shard}.jsonl",
        "--base-url", BASE_URL,
        "--rpm", "300", "--tps", "60000",
        "--max-error-rate", "0.001",
        "--grace", f"{GRACE_S}s",
    ]


# Tonight's labels of a shard beside last night's: exit 4 when they moved past DRIFT_GATE.
def gate_args(shard: int, ds: str, prev_ds: str) -> list[str]:
    return [
        "report", f"s3://acme-support/answers/{ds}/part-{shard}.jsonl",
        "--compare", f"s3://acme-support/answers/{prev_ds}/part-{shard}.jsonl",
        "--fail-if", DRIFT_GATE,
        "--output", f"drift-{ds}-part-{shard}.html",
    ]


def fail_by_exit_code(code: int, what: str) -> None:
    """Raise what Airflow should do for a typed-eval exit code (0 returns)."""
    if code == 0:
        return
    if code == NO_INPUT:
        raise AirflowSkipException(f"{what}: no input tonight (exit 6)")
    if code == GATE_FAILED:
        raise AirflowFailException(f"{what}: tonight's labels drifted past the gate (exit 4): see the report before using them")
    if code in RESUMABLE:
        raise AirflowException(f"{what}: exit {code}, resumable: retrying")
    if code == KILLED:
        raise AirflowException(f"{what}: exit {code}, killed (out of memory or kill -9): retrying, it resumes from the journal")
    raise AirflowFailException(f"{what}: exit {code}, retrying will not help (see the task log)")


def base_exit_code(pod, container: str) -> int | None:
    """The exit code of a finished pod's container, from the pod object (None when it has none)."""
    statuses = (pod.status.container_statuses or []) if pod and pod.status else []
    terminated = [s.state.terminated for s in statuses if s.name == container and s.state and s.state.terminated]
    return terminated[0].exit_code if terminated else None


class TypedEvalPod(KubernetesPodOperator):
    """A pod per shard; its exit code decides as fail_by_exit_code says (retried, skipped or failed)."""

    exit_code: int | None = None

    def cleanup(self, pod, remote_pod):
        # The operator deletes the pod here (on_finish_action "delete_pod"): keep the exit code of the final
        # state it passes in, read before the deletion; reading the pod afterwards gets a 404.
        self.exit_code = base_exit_code(remote_pod, self.base_container_name)
        return super().cleanup(pod, remote_pod)

    def execute(self, context):
        try:
            return super().execute(context)
        except AirflowException:
            if self.exit_code is None:
                raise
            fail_by_exit_code(self.exit_code, f"shard pod {self.task_id}")
            raise


with DAG(dag_id="typed_eval_triage_k8s", **NIGHTLY) as triage_k8s:
    shards = [
        TypedEvalPod(
            task_id=f"shard_{i}_of_{SHARDS}",
            name=f"typed-eval-shard-{i}",
            image=IMAGE,
            # No cmds: the image's ENTRYPOINT (tini -- typed-eval) stays, with tini as PID 1.
            arguments=run_args(i, "{{ ds }}") + ["--summary-json", "/airflow/xcom/return.json"],
            secrets=[Secret("env", "TYPED_EVAL_API_KEY", "typed-eval-api", "key")],
            container_resources=k8s.V1ResourceRequirements(
                requests={"cpu": "1", "memory": "512Mi"}, limits={"memory": "1Gi"}
            ),
            do_xcom_push=True,
            # A killed task deletes its pod: the runner stops cleanly on SIGTERM within --grace, then writes its summary.
            termination_grace_period=60,
        )
        for i in range(1, SHARDS + 1)
    ]
    # Reads answers only (S3 credentials as the shards have them): no key, no model.
    gates = [
        TypedEvalPod(
            task_id=f"drift_gate_{i}_of_{SHARDS}",
            name=f"typed-eval-gate-{i}",
            image=IMAGE,
            arguments=gate_args(i, "{{ ds }}", "{{ macros.ds_add(ds, -1) }}"),
            container_resources=k8s.V1ResourceRequirements(requests={"cpu": "1", "memory": "512Mi"}, limits={"memory": "1Gi"}),
        )
        for i in range(1, SHARDS + 1)
    ]
    for shard_task, gate in zip(shards, gates):
        shard_task >> gate


def typed_eval(args: list[str], **popen) -> int:
    """Runs typed-eval to its end; its exit code, 128 + N when signal N killed it (as a shell and Kubernetes say).

    Airflow 2 stops a task by raising inside it: AirflowTaskTerminated from its SIGTERM handler (the task
    killed), AirflowTaskTimeout (execution_timeout). subprocess.call, so interrupted, SIGKILLs its child at
    once. Here typed-eval runs in a session of its own, out of reach of the SIGTERM Airflow sends the task's
    process group, and the stop is forwarded once, then typed-eval gets its grace to end stopped.
    """
    child = subprocess.Popen(["typed-eval", *args], start_new_session=True, **popen)
    try:
        code = child.wait()
    except BaseException as stop:
        stop_child(child, signal.SIGINT if isinstance(stop, KeyboardInterrupt) else signal.SIGTERM)
        raise
    return 128 - code if code < 0 else code


def stop_child(child: subprocess.Popen, sig: int) -> None:
    """Sends typed-eval `sig`, gives it GRACE_S + STOP_MARGIN_S to end (143 or 130, its summary written), then SIGKILL."""
    # Another SIGTERM meanwhile is passed on: typed-eval then abandons what is in flight (still writing its summary).
    previous = signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
    try:
        child.send_signal(sig)
        print(f"typed-eval (pid {child.pid}) asked to stop; waiting up to {GRACE_S + STOP_MARGIN_S} s", flush=True)
        try:
            child.wait(timeout=GRACE_S + STOP_MARGIN_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        print(f"typed-eval ended with exit {128 - child.returncode if child.returncode < 0 else child.returncode}", flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_shard(shard: int, ds: str, **_context) -> dict:
    key = BaseHook.get_connection("typed_eval_api").password
    summary_path = f"/var/lib/typed-eval/{ds}/part-{shard}.summary.json"
    code = typed_eval(
        [*run_args(shard, ds), "--summary-json", summary_path],
        # Added to the worker's environment, not instead of it: PATH, HOME and AWS_* pass through.
        env={**os.environ, "TYPED_EVAL_API_KEY": key},
        cwd="/var/lib/typed-eval",
    )
    fail_by_exit_code(code, f"shard {shard}/{SHARDS}")
    with open(summary_path, encoding="utf-8") as f:
        return json.load(f)  # the usage summary, pushed to XCom


def gate_shard(shard: int, ds: str, prev_ds: str, **_context) -> None:
    code = typed_eval(gate_args(shard, ds, prev_ds), cwd="/var/lib/typed-eval")
    fail_by_exit_code(code, f"drift gate of shard {shard}/{SHARDS}")


with DAG(dag_id="typed_eval_triage_bash", **NIGHTLY) as triage_bash:
    shard_tasks = [
        PythonOperator(task_id=f"shard_{i}_of_{SHARDS}", python_callable=run_shard, op_kwargs={"shard": i, "ds": "{{ ds }}"})
        for i in range(1, SHARDS + 1)
    ]
    gate_tasks = [
        PythonOperator(
            task_id=f"drift_gate_{i}_of_{SHARDS}",
            python_callable=gate_shard,
            op_kwargs={"shard": i, "ds": "{{ ds }}", "prev_ds": "{{ macros.ds_add(ds, -1) }}"},
        )
        for i in range(1, SHARDS + 1)
    ]
    for shard_task, gate in zip(shard_tasks, gate_tasks):
        shard_task >> gate
