"""Airflow 2's exceptions, with its hierarchy: the two that interrupt a task are BaseExceptions (airflow/exceptions.py)."""


class AirflowException(Exception):
    """A task's failure: retried while retries remain."""


class AirflowFailException(AirflowException):
    """Fails the task at once, without retrying."""


class AirflowSkipException(AirflowException):
    """Marks the task skipped."""


class AirflowTaskTerminated(BaseException):
    """Raised by the task's SIGTERM handler (2.7 and later; earlier: AirflowException("Task received SIGTERM signal"))."""


class AirflowTaskTimeout(BaseException):
    """Raised by the alarm of a task's execution_timeout."""
