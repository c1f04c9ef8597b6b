"""PythonOperator: its op_kwargs templated, merged into the context (theirs win: context_merge), passed to python_callable."""
from __future__ import annotations

from airflow.models import BaseOperator


class PythonOperator(BaseOperator):
    template_fields = ("op_kwargs",)

    def __init__(self, *, task_id: str, python_callable, op_kwargs: dict | None = None, **settings) -> None:
        super().__init__(task_id=task_id, **settings)
        self.python_callable = python_callable
        self.op_kwargs = op_kwargs or {}

    def execute(self, context: dict):
        # Airflow 2 passes a callable with **kwargs every key (KeywordParameters.determine); the DAG's callables take **_context.
        return self.python_callable(**{**context, **self.op_kwargs})
