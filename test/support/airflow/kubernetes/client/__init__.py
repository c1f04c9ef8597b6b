"""Stand-in for the Kubernetes Python client: the models the DAG and the pod operator touch."""
from kubernetes.client import models  # noqa: F401
from kubernetes.client.exceptions import ApiException  # noqa: F401
