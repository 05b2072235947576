"""A check's verdicts as JUnit XML, the format CI systems show (GitHub, GitLab, Jenkins)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    """One gate of a check: passed, failed (with why) or skipped (with why)."""

    name: str
    outcome: str  # "passed", "failed" or "skipped"
    message: str


def junit_xml(suite: str, verdicts: list[Verdict], seconds: float) -> str:
    root = ET.Element("testsuites")
    element = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(verdicts)),
        failures=str(sum(v.outcome == "failed" for v in verdicts)),
        skipped=str(sum(v.outcome == "skipped" for v in verdicts)),
        errors="0",
        time=f"{seconds:.1f}",
    )
    for verdict in verdicts:
        case = ET.SubElement(element, "testcase", classname=suite, name=verdict.name, time="0")
        if verdict.outcome == "failed":
            ET.SubElement(case, "failure", message=verdict.message).text = verdict.message
        elif verdict.outcome == "skipped":
            ET.SubElement(case, "skipped", message=verdict.message)
        else:
            ET.SubElement(case, "system-out").text = verdict.message
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
