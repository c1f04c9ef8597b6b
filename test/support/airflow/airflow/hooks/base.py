"""BaseHook.get_connection, from the environment as Airflow 2 reads it first: AIRFLOW_CONN_<CONN_ID> holds a URI."""
from __future__ import annotations

import os
from types import SimpleNamespace
from urllib.parse import unquote, urlsplit

from airflow.exceptions import AirflowException


class BaseHook:
    @classmethod
    def get_connection(cls, conn_id: str) -> SimpleNamespace:
        uri = os.environ.get(f"AIRFLOW_CONN_{conn_id.upper()}")
        if uri is None:
            raise AirflowException(f"The conn_id `{conn_id}` isn't defined")
        parts = urlsplit(uri)
        return SimpleNamespace(conn_id=conn_id, host=parts.hostname, login=unquote(parts.username or ""), password=unquote(parts.password or ""))
