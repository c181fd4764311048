#!/usr/bin/env python3
"""The comparison of tests/slurm/slurm_diff.py on records written as its stub writes them: equal
runs agree; a changed SLURM_* value, a process on one side only and another exit status each
fail; an allow-list entry covers only the field (and Slurm's value) it names."""
import importlib.util
import os
import tempfile
import unittest

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("slurm_diff", os.path.join(_here, "slurm_diff.py"))
sd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sd)


def line(prog, node, step, procid, ntasks, hosts, job, args, **extra):
    fields = {"prog": prog, "node": node, "step": step, "job": job, "array_job": ""}
    for v in sd.VARIABLES:
        fields[v] = "-"
    fields.update(SLURM_PROCID=procid, SLURM_NTASKS=ntasks, **extra)
    fields["hosts"] = " ".join(hosts) + " "
    fields["args"] = args
    return "\t".join(f"{k}={v}" for k, v in fields.items())


class CompareTest(unittest.TestCase):
    def records(self, lines, work="/w"):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        try:
            return sd.read_records(f.name, work)
        finally:
            os.unlink(f.name)

    def run_of(self, lines, exit_status="0:0", work="/w"):
        return {"outcome": "ran", "exit": [exit_status], "records": self.records(lines, work)}

    def slurm(self, procid1="1", ntasks_batch="-"):
        hosts = ["n001", "n002"]
        return [line("python", "0", "", "0", ntasks_batch, hosts, "7", "prep.py --out /s/w/x"),
                line("torchrun", "0", "yes", "0", "2", hosts, "7", "--master n001 --id 7"),
                line("torchrun", "1", "yes", procid1, "2", hosts, "7", "--master n001 --id 7")]

    def hangar(self, ntasks_batch="-"):
        hosts = ["node-3", "node-4"]
        return [line("python", "0", "", "0", ntasks_batch, hosts, "12", "prep.py --out /h/w/x"),
                line("torchrun", "0", "yes", "0", "2", hosts, "12", "--master node-3 --id 12"),
                line("torchrun", "1", "yes", "1", "2", hosts, "12", "--master node-3 --id 12")]

    def test_equal_runs_agree_across_host_names_job_ids_and_folders(self):
        bad, ok = sd.differences("x", self.run_of(self.slurm(), work="/s/w"),
                                 self.run_of(self.hangar(), work="/h/w"), {})
        self.assertEqual((bad, ok), ([], []))

    def test_a_changed_rank_fails(self):
        bad, _ = sd.differences("x", self.run_of(self.slurm(procid1="2"), work="/s/w"),
                                self.run_of(self.hangar(), work="/h/w"), {})
        self.assertEqual(len(bad), 1)
        self.assertIn("SLURM_PROCID: Slurm '2', Hangar '1'", bad[0])

    def test_a_process_on_one_side_only_fails(self):
        bad, _ = sd.differences("x", self.run_of(self.slurm()[:2], work="/s/w"),
                                self.run_of(self.hangar(), work="/h/w"), {})
        self.assertEqual(len(bad), 1)
        self.assertIn("only Hangar ran: prog=torchrun node=1", bad[0])

    def test_another_exit_status_fails(self):
        bad, _ = sd.differences("x", self.run_of(self.slurm(), "3:0", work="/s/w"),
                                self.run_of(self.hangar(), work="/h/w"), {})
        self.assertEqual(bad, ["exit: Slurm ['3:0'], Hangar ['0:0']"])

    def test_the_allow_list_covers_only_its_field_and_slurms_value(self):
        allowed = {("*", "SLURM_NTASKS"): ("-", "why")}
        bad, ok = sd.differences("x", self.run_of(self.slurm(), work="/s/w"),
                                 self.run_of(self.hangar(ntasks_batch="1"), work="/h/w"), allowed)
        self.assertEqual(bad, [])
        self.assertEqual(len(ok), 1)
        bad, _ = sd.differences("x", self.run_of(self.slurm(ntasks_batch="4"), work="/s/w"),
                                self.run_of(self.hangar(ntasks_batch="1"), work="/h/w"), allowed)
        self.assertEqual(len(bad), 1, "Slurm's '4' is not the '-' the entry names")


if __name__ == "__main__":
    unittest.main()
