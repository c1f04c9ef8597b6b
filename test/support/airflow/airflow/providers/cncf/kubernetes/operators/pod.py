"""KubernetesPodOperator (cncf.kubernetes provider, 7.x to 10.x), synchronous mode, on a stand-in cluster.

As the provider does (operators/pod.py): ``execute_sync`` creates the pod, waits for its base container,
reads the XCom sidecar's /airflow/xcom/return.json, reads the pod's final state (``remote_pod``) and, in a
``finally``, calls ``cleanup(pod, remote_pod)``; ``cleanup`` deletes the pod (``on_finish_action``
"delete_pod", the default), then raises AirflowSkipException for a ``skip_on_exit_code`` or
AirflowException("Pod ... returned a failure.") when the pod did not succeed. Once deleted, reading the
pod gets a 404 (``ApiException``). ``on_kill`` (a killed task) deletes the pod with its grace period.

The cluster runs each pod as a local process in a session of its own (a pod is not in the worker's
process group): the image's entrypoint after tini (``K8S_STANDIN_ENTRYPOINT``, a JSON list) with the
operator's ``arguments``, in the image's WORKDIR (``K8S_STANDIN_WORKDIR``), with the image's and the
pod's environment (``K8S_STANDIN_POD_ENV``, JSON) and the secrets given as env (``K8S_STANDIN_SECRETS``:
{"secret": {"key": "value"}}). Its exit code is the container's, 128 + N for a signal N, as the kubelet
reports it (137: killed, out of memory). Deleting a running pod sends it SIGTERM.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess

from airflow.exceptions import AirflowException, AirflowSkipException
from airflow.models import BaseOperator
from kubernetes.client import models as k8s
from kubernetes.client.exceptions import ApiException

EMPTY_XCOM_RESULT = "__airflow_xcom_result_empty__"


class PodManager:
    def __init__(self) -> None:
        self.processes: dict[str, subprocess.Popen] = {}
        self.deleted: set[str] = set()

    def create_pod(self, pod: k8s.V1Pod) -> None:
        env = {**json.loads(os.environ.get("K8S_STANDIN_POD_ENV", "{}")), **pod.env}
        command = json.loads(os.environ["K8S_STANDIN_ENTRYPOINT"]) + pod.arguments
        self.processes[pod.metadata.name] = subprocess.Popen(command, env=env, cwd=os.environ.get("K8S_STANDIN_WORKDIR", "/"), start_new_session=True)

    def await_container_completion(self, pod: k8s.V1Pod) -> None:
        self.processes[pod.metadata.name].wait()

    def read_pod(self, pod: k8s.V1Pod) -> k8s.V1Pod:
        name = pod.metadata.name
        if name in self.deleted:
            raise ApiException(status=404, reason="Not Found")
        code = self.processes[name].poll()
        if code is None:
            return k8s.V1Pod(metadata=pod.metadata, status=k8s.V1PodStatus(phase="Running", container_statuses=[]))
        code = 128 - code if code < 0 else code
        terminated = k8s.V1ContainerStateTerminated(exit_code=code, reason="Completed" if code == 0 else "OOMKilled" if code == 137 else "Error")
        status = k8s.V1ContainerStatus(name="base", state=k8s.V1ContainerState(terminated=terminated))
        return k8s.V1Pod(metadata=pod.metadata, status=k8s.V1PodStatus(phase="Succeeded" if code == 0 else "Failed", container_statuses=[status]))

    def await_pod_completion(self, pod: k8s.V1Pod) -> k8s.V1Pod:
        self.await_container_completion(pod)
        return self.read_pod(pod)

    def extract_xcom(self, pod: k8s.V1Pod) -> str:
        path = "/airflow/xcom/return.json"
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path, encoding="utf-8") as f:
                return f.read()
        return EMPTY_XCOM_RESULT

    def delete_pod(self, pod: k8s.V1Pod, grace_period_seconds: int = 30) -> None:
        """Gone from the API at once; a pod still running gets SIGTERM (the kubelet's SIGKILL after the grace is not modelled)."""
        self.deleted.add(pod.metadata.name)
        process = self.processes.get(pod.metadata.name)
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)


class KubernetesPodOperator(BaseOperator):
    template_fields = ("arguments",)

    def __init__(
        self,
        *,
        task_id: str,
        name: str,
        image: str,
        arguments: list[str] | None = None,
        secrets: list | None = None,
        do_xcom_push: bool = False,
        skip_on_exit_code: int | list[int] | None = None,
        termination_grace_period: int | None = None,
        on_finish_action: str = "delete_pod",
        container_resources: k8s.V1ResourceRequirements | None = None,
        **settings,
    ) -> None:
        super().__init__(task_id=task_id, **settings)
        self.name = name
        self.image = image
        self.arguments = arguments or []
        self.secrets = secrets or []
        self.do_xcom_push = do_xcom_push
        self.skip_on_exit_code = [skip_on_exit_code] if isinstance(skip_on_exit_code, int) else (skip_on_exit_code or [])
        self.termination_grace_period = termination_grace_period
        self.on_finish_action = on_finish_action
        self.container_resources = container_resources
        self.base_container_name = "base"
        self.pod: k8s.V1Pod | None = None
        self.remote_pod: k8s.V1Pod | None = None
        self._killed = False
        self.pod_manager = PodManager()

    def build_pod(self) -> k8s.V1Pod:
        values = json.loads(os.environ.get("K8S_STANDIN_SECRETS", "{}"))
        env = {s.deploy_target: values[s.secret][s.key] for s in self.secrets if s.deploy_type == "env"}
        return k8s.V1Pod(metadata=k8s.V1ObjectMeta(name=self.name, namespace="default"), arguments=list(self.arguments), env=env)

    def execute(self, context: dict):
        result = None
        try:
            self.pod = self.build_pod()
            self.pod_manager.create_pod(self.pod)
            self.pod_manager.await_container_completion(self.pod)
            if self.do_xcom_push:
                raw = self.pod_manager.extract_xcom(self.pod)
                result = None if raw.rstrip() == EMPTY_XCOM_RESULT else json.loads(raw)
            self.remote_pod = self.pod_manager.await_pod_completion(self.pod)
        finally:
            self.cleanup(pod=self.pod, remote_pod=self.remote_pod)
        if self.do_xcom_push:
            return result

    def cleanup(self, pod: k8s.V1Pod, remote_pod: k8s.V1Pod) -> None:
        if self._killed or not remote_pod:
            return
        failed = remote_pod.status.phase != "Succeeded"
        self.process_pod_deletion(remote_pod)
        if self.skip_on_exit_code:
            statuses = remote_pod.status.container_statuses or []
            base = next((s for s in statuses if s.name == self.base_container_name), None)
            exit_code = base.state.terminated.exit_code if base and base.state and base.state.terminated else None
            if exit_code in self.skip_on_exit_code:
                raise AirflowSkipException(f"Pod {pod and pod.metadata.name} returned exit code {exit_code}. Skipping.")
        if failed:
            raise AirflowException(f"Pod {pod and pod.metadata.name} returned a failure.")

    def process_pod_deletion(self, pod: k8s.V1Pod) -> None:
        succeeded = pod.status.phase == "Succeeded"
        if self.on_finish_action == "delete_pod" or (self.on_finish_action == "delete_succeeded_pod" and succeeded):
            self.pod_manager.delete_pod(pod)

    def on_kill(self) -> None:
        self._killed = True
        if self.pod is not None:
            self.pod_manager.delete_pod(self.pod, grace_period_seconds=self.termination_grace_period or 30)
