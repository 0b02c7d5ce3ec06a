"""The request driver shared by `omni synth` and `omni bench` (see `omnicli.driver.drive`)."""

from omnicli.driver.drive import STOP_GRACE_S, DriveResult, drive, run_request
from omnicli.driver.load import LoadShape, arrival_offsets, offer
from omnicli.driver.records import Outcome, Prompt, RequestRecord

__all__ = [
    "STOP_GRACE_S", "DriveResult", "LoadShape", "Outcome", "Prompt", "RequestRecord",
    "arrival_offsets", "drive", "offer", "run_request",
]
