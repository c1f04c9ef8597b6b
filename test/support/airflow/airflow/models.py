"""BaseOperator: a task of the DAG being defined, its retries from the DAG's default_args, its template fields."""
from __future__ import annotations

from airflow import DAG


class BaseOperator:
    template_fields: tuple = ()

    def __init__(self, task_id: str, retries: int | None = None, **_settings) -> None:
        self.task_id = task_id
        self.dag = DAG.current
        defaults = self.dag.default_args if self.dag else {}
        self.retries = defaults.get("retries", 0) if retries is None else retries
        self.downstream: list = []
        if self.dag is not None:
            self.dag.tasks[task_id] = self

    def __rshift__(self, other: "BaseOperator") -> "BaseOperator":
        self.downstream.append(other)
        return other

    def on_kill(self) -> None:
        """Called by the task's SIGTERM handler before it raises (BaseOperator's does nothing)."""

    def execute(self, context: dict):
        raise NotImplementedError
