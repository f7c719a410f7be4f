"""MLflow after a killed sweep driver: the nested runs of trials that Tune never recorded (it replaces them on
``--resume``) would stay RUNNING forever; they are marked KILLED and tagged ``stopped=orphaned``."""

from __future__ import annotations


def close_orphan_runs(uri: str, parent_run_id: str, trial_ids: set[str]) -> None:
    """Mark KILLED the trial runs of a killed driver whose trials Tune had not recorded (it replaces them)."""
    from swarmlab.drive.sweep.trial import TRIAL_TAG
    from swarmlab.tracking import open_client

    client = open_client(uri)
    exp_id = client.get_run(parent_run_id).info.experiment_id
    for run in client.search_runs(
        [exp_id], filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}' and attributes.status = 'RUNNING'"
    ):
        if run.data.tags.get(TRIAL_TAG) not in trial_ids:
            client.set_tag(run.info.run_id, "stopped", "orphaned")
            client.set_terminated(run.info.run_id, status="KILLED")
