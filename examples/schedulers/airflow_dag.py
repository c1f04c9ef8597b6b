"""Nightly typed-eval job, sharded over 4 Airflow tasks, then a usage report.

Each task runs one shard; the shards split the records deterministically
(`--shard i/n`), and their union is the whole input. A failed task can be
cleared and rerun: the runner resumes from its journal and pays no record
twice. Exit code 1 (some records failed, listed in the errors file) is
treated as success here; 2 and 3 fail the task (3 is resumable on retry).
"""
from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator

SHARDS = 4
RUN = "cd /opt/typed-eval && ./bin/typed-eval.js"
DAY = "{{ ds }}"

with DAG(
    dag_id="typed_eval_ticket_triage",
    start_date=datetime(2026, 11, 1),
    schedule="30 2 * * *",
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=10)},
) as dag:
    shards = [
        BashOperator(
            task_id=f"shard_{i}_of_{SHARDS}",
            bash_command=(
                f"{RUN} run s3://acme-support/tickets/{DAY}/ --job jobs/support-triage.json"
                f" --shard {i}/{SHARDS} --output s3://acme-support/answers/{DAY}/part-{i}.jsonl"
                " --base-url $TYPED_EVAL_BASE_URL --rpm 300 --tps 60000; code=$?;"
                " [ $code -eq 0 ] || [ $code -eq 1 ]"
            ),
        )
        for i in range(1, SHARDS + 1)
    ]
    report = BashOperator(
        task_id="usage_report",
        bash_command=(
            "mkdir -p /tmp/usage-{{ ds }} && "
            + " && ".join(
                f"aws s3 cp s3://acme-support/answers/{DAY}/part-{i}.jsonl.usage.json /tmp/usage-{DAY}/{i}.json"
                for i in range(1, SHARDS + 1)
            )
            + f" && {RUN} usage /tmp/usage-{DAY}/*.json --project 1000000"
        ),
    )
    shards >> report
