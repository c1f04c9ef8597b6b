"""Stand-in for Apache Airflow 2 (see ../README.md): the DAG a `with` block defines."""
from __future__ import annotations


class DAG:
    """Collects the operators created inside its `with` block, as airflow.models.dag.DAG does."""

    current: "DAG | None" = None

    def __init__(self, dag_id: str, default_args: dict | None = None, **_settings) -> None:
        self.dag_id = dag_id
        self.default_args = default_args or {}
        self.tasks: dict = {}

    def __enter__(self) -> "DAG":
        DAG.current = self
        return self

    def __exit__(self, *_exc) -> None:
        DAG.current = None
