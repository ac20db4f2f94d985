"""bonnie++'s file-metadata test as the workload: create, stat and delete N×1024 small files in
sequential and in random order (job spooling, mail queues, build trees), counted as those six file
operations on each file. A fixed amount of work run flat out: the window lasts as long as bonnie++
does, so its rate is what the filesystem gives; it cannot be paced to a lower load."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from ..base import SettingError, WorkloadError
from ..tools import ToolWorkload, report_error

OPS_PER_FILE = 6  # sequential create, stat, delete; random create, stat, delete
FILES_FIELD = 21  # the "files" field (thousands of files) of CSV format 1.98 (bonnie++ 1.98 to 2.00a)
CSV_FORMAT = "1.98"


class BonnieWorkload(ToolWorkload):
    name = "bonnie"
    ops_unit = "file-ops"
    TOOL = "bonnie++"
    DEFAULTS: ClassVar[dict[str, Any]] = {"dir": "wattbench-bonnie", "files": 16, "user": ""}
    SETTINGS = tuple(DEFAULTS)
    INTEGER_RATE = False

    def check(self, settings: dict[str, Any]) -> None:
        if not 1 <= settings["files"] <= 1024:
            raise WorkloadError("bonnie workload: files must be 1 to 1024 (thousands of files)")
        if not settings["dir"] or settings["dir"].startswith("-"):
            raise WorkloadError("bonnie workload: dir must be a directory path")

    def template(self, settings: dict[str, Any]) -> str:
        # -s 0: no large-file I/O test (fio measures that); -q: the CSV result on stdout.
        user = f" -u {settings['user']}" if settings["user"] else ""
        return f"bonnie++ -d {settings['dir']} -s 0 -n {settings['files']} -q{user}"

    def preflight(self) -> None:
        super().preflight()
        if os.geteuid() == 0 and not self.settings["user"]:
            # bonnie++ refuses to run as root without -u: known before the run, not after its start
            raise SettingError(
                "user", 'not set, and bonnie++ refuses to run as root without one (user = "root")'
            )

    def open(self) -> None:
        super().open()
        try:
            os.makedirs(self.settings["dir"], exist_ok=True)
        except OSError as exc:
            raise WorkloadError(
                f"bonnie workload: cannot make {self.settings['dir']}: {exc.strerror}"
            ) from None

    def parse_report(self, text: str) -> float:
        for line in text.splitlines():
            cells = line.strip().split(",")
            if len(cells) > FILES_FIELD and cells[0][:1].isdigit() and "." in cells[0]:
                if cells[0] != CSV_FORMAT:
                    raise report_error("bonnie++", f"CSV format {cells[0]}, not {CSV_FORMAT}", text)
                try:
                    files = int(cells[FILES_FIELD])
                except ValueError:
                    raise report_error("bonnie++", f"files field {cells[FILES_FIELD]!r}", text) from None
                return float(files * 1024 * OPS_PER_FILE)
        raise report_error("bonnie++", "no CSV result line", text)
