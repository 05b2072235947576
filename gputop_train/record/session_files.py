"""One session's files, from the start of the job to the summary written on the way out."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import events
from ..session.model import Session
from .files import RecordError, create_private, describe_os_error, recording_stem, save_screenshot
from .files import temporary_log_path as _temporary_log_path
from .recorder import Recorder
from .summary import write_all


@dataclass
class Closed:
    """What the way out left: the files written, and those it could not write (and why)."""

    written: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class SessionFiles:
    """The recording (unless --no-record), the job's log and, at the end, the summaries.

    ``open`` raises RecordError with a one-line fix when they cannot be created."""

    def __init__(self, stem: Path, recorder: Recorder | None, log: Path, temporary: bool):
        self.stem = stem
        self.recorder = recorder
        self.log = log
        self.log_is_temporary = temporary  # --no-record: removed once the job has ended
        self.meta: dict[str, Any] = {}

    @classmethod
    def open(
        cls, record: str | None, no_record: bool, command: list[str], session: Session,
        meta: dict[str, Any],
    ) -> SessionFiles:  # fmt: skip
        if no_record:
            files = cls(Path(os.devnull), None, _temporary_log_path(), temporary=True)
        else:
            stem = recording_stem(record, command)
            recording = Path(f"{stem}.jsonl")

            def failed(message: str) -> None:
                session.apply(events.NoticeAdded(message))

            try:
                recorder = Recorder(recording, meta, on_failure=failed)
            except OSError as error:
                raise RecordError(f"cannot record: {describe_os_error(error, recording)}") from None
            session.listener = recorder.record_event
            files = cls(stem, recorder, Path(f"{stem}.log"), temporary=False)
        files.meta = meta
        return files

    @property
    def recording(self) -> Path | None:
        return self.recorder.path if self.recorder is not None else None

    def open_log(self) -> int:
        """The job's log, created for the relay to write (RecordError when it cannot be)."""
        try:
            return create_private(self.log, append=True)
        except OSError as error:
            message = f"cannot write the job's log: {describe_os_error(error, self.log)}"
            raise RecordError(message) from None

    def save_screenshot(self, svg: str) -> Path:
        """The TUI's ``S``: beside the job's log, named after the session, private (0600)."""
        return save_screenshot(self.log.with_suffix(""), svg, time.time())

    def finish(self, session: Session, job_running: bool) -> Closed:
        """Close the recording and write the summaries beside it, on every way out; what could
        not be written is said, never raised (a full disk must not cost the rest)."""
        closed = Closed()
        if self.recorder is not None:
            session.listener = None
            self.recorder.close()
            closed.written.append(self.recorder.path)
            if self.recorder.renamed_from is not None:
                closed.problems.append(
                    f"the recording was moved from {self.recorder.renamed_from} while it ran: "
                    "its summaries are beside its new path"
                )
            if self.recorder.failed:
                closed.problems.append(f"the recording stopped early: {self.recorder.failed}")
            written, problems = write_all(session, self.meta, self.recorder.path)
            closed.written += written
            closed.problems += problems
        if self.log_is_temporary and not job_running:
            with contextlib.suppress(OSError):
                self.log.unlink()
        elif self.log.exists():
            closed.written.insert(0 if self.recorder is None else 1, self.log)
        return closed
