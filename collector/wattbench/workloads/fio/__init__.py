"""fio as the workload: random or sequential I/O on one file, paced by fio itself (rate_iops with
Poisson arrivals), counted as I/Os completed in the window."""

from __future__ import annotations

import errno
import json
import os
import re
from typing import Any, ClassVar

from ...forms import writable_file_problem
from ..base import SettingError, WorkloadError
from ..tools import ToolWorkload, report_error

RW = ("randread", "randwrite", "randrw", "read", "write", "rw")
SIZE = re.compile(r"^[0-9]+[kKmMgGtT]?$")


def direct_io_problem(path: str) -> str | None:
    """Why the file cannot be opened for direct I/O, tried on the file itself; None when it can. A
    filesystem that refuses O_DIRECT (tmpfs before Linux 6.6, some network filesystems) says EINVAL."""

    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return "this system has no O_DIRECT"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | flag, 0o600)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return f"{path}'s filesystem refuses direct I/O"
        return f"cannot open {path}: {exc.strerror}"
    os.close(fd)
    return None


class FioWorkload(ToolWorkload):
    name = "fio"
    ops_unit = "IOs"
    TOOL = "fio"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "file": "wattbench-fio.dat",
        "size": "1G",
        "rw": "randread",
        "bs": "4k",
        "iodepth": 1,
        "ioengine": "psync",
        "direct": True,
    }
    SETTINGS = tuple(DEFAULTS)

    def check(self, settings: dict[str, Any]) -> None:
        if settings["rw"] not in RW:
            raise WorkloadError(f"fio workload: rw must be one of {', '.join(RW)}")
        for key in ("size", "bs"):
            if not SIZE.match(str(settings[key])):
                raise WorkloadError(f"fio workload: {key} must be a size such as 4k or 1G")
        if not 1 <= settings["iodepth"] <= 1024:
            raise WorkloadError("fio workload: iodepth must be 1 to 1024")
        if not re.match(r"^[a-z0-9_]+$", settings["ioengine"]):
            raise WorkloadError("fio workload: ioengine must be an engine name such as psync or libaio")
        if not settings["file"] or settings["file"].startswith("-"):
            raise WorkloadError("fio workload: file must be a path")

    def template(self, settings: dict[str, Any]) -> str:
        return " ".join(
            [
                "fio --name=wattbench",
                f"--filename={settings['file']}",
                f"--size={settings['size']}",
                f"--rw={settings['rw']}",
                f"--bs={settings['bs']}",
                f"--iodepth={settings['iodepth']}",
                f"--ioengine={settings['ioengine']}",
                f"--direct={1 if settings['direct'] else 0}",
                "--time_based --runtime={duration}",
                # 0 is flat out (calibration); otherwise fio spaces the I/Os as a Poisson process.
                "--rate_iops={rate} --rate_process=poisson",
                "--output-format=json",
            ]
        )

    def preflight(self) -> None:
        super().preflight()
        # fio makes the file; a folder that is not there failed the run after its start, exit 4
        problem = writable_file_problem(self.settings["file"])
        if problem:
            raise SettingError("file", problem)

    def open(self) -> None:
        super().open()
        problem = direct_io_problem(self.settings["file"]) if self.settings["direct"] else None
        if problem is not None:
            # Without O_DIRECT the page cache serves the reads, which the report must not pass off as
            # the device's I/O.
            raise WorkloadError(
                f"fio workload: {problem}; put the file on a disk, or set direct = false to measure "
                "the page cache knowingly"
            )

    def parse_report(self, text: str) -> float:
        start = text.find("{")
        if start < 0:
            raise report_error("fio", "no JSON report", text)
        try:
            doc = json.loads(text[start:])
        except ValueError:
            raise report_error("fio", "its JSON report does not parse", text) from None
        jobs = doc.get("jobs") if isinstance(doc, dict) else None
        if not isinstance(jobs, list) or not jobs:
            raise report_error("fio", "its report has no jobs", text)
        total = 0
        for job in jobs:
            if job.get("error"):
                raise WorkloadError(f"fio: job {job.get('jobname')} ended with error {job['error']}")
            for direction in ("read", "write", "trim"):
                ios = (job.get(direction) or {}).get("total_ios", 0)
                if not isinstance(ios, int) or ios < 0:
                    raise report_error("fio", f"{direction}.total_ios is {ios!r}", text)
                total += ios
        return float(total)
