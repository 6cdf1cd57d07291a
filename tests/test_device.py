"""The package's one device policy: spellings, resolution against what torch reports, ensemble placement."""

import pytest
from typer.testing import CliRunner

from benchbuild.cli import app
from benchbuild.device import check_device, member_devices, resolve_device
from benchbuild.errors import BenchbuildError


@pytest.mark.parametrize("spec", ["auto", "cpu", "cuda", "cuda:0", "cuda:7", "cuda:12"])
def test_every_documented_spelling_is_accepted(spec):
    assert check_device(spec) == spec


@pytest.mark.parametrize("spec", ["GPU:0", "cuda:", "cuda:x", "cuda:-1", "cuda:01", "CPU", "cuda0", ""])
def test_other_spellings_are_refused_naming_the_choices(spec):
    with pytest.raises(BenchbuildError, match="auto, cpu, cuda or cuda:N"):
        check_device(spec)


def test_auto_is_the_first_gpu_when_there_is_one_else_the_cpu():
    assert resolve_device("auto", cuda_devices=0) == "cpu"
    assert resolve_device("auto", cuda_devices=2) == "cuda:0"


def test_cuda_and_cuda_n_resolve_to_an_indexed_gpu():
    assert resolve_device("cuda", cuda_devices=1) == "cuda:0"
    assert resolve_device("cuda:3", cuda_devices=4) == "cuda:3"
    assert resolve_device("cpu", cuda_devices=4) == "cpu"


def test_a_gpu_that_torch_does_not_report_is_refused():
    with pytest.raises(BenchbuildError, match="sees no CUDA device"):
        resolve_device("cuda", cuda_devices=0)
    with pytest.raises(BenchbuildError, match=r"sees 2 CUDA devices \(cuda:0 .. cuda:1\)"):
        resolve_device("cuda:2", cuda_devices=2)


def test_ensemble_members_go_round_robin_over_the_gpus_and_never_mix_cpu_and_cuda():
    assert member_devices("auto", 5, cuda_devices=2) == ["cuda:0", "cuda:1", "cuda:0", "cuda:1", "cuda:0"]
    assert member_devices("cuda", 3, cuda_devices=1) == ["cuda:0"] * 3
    assert member_devices("cuda:1", 3, cuda_devices=2) == ["cuda:1"] * 3
    assert member_devices("auto", 3, cuda_devices=0) == ["cpu"] * 3
    assert member_devices("cpu", 2, cuda_devices=4) == ["cpu"] * 2


def test_every_member_device_is_one_that_train_accepts():
    for count in (0, 1, 3):
        for device in member_devices("auto", 10, cuda_devices=count):
            assert resolve_device(device, cuda_devices=count) == device


@pytest.mark.parametrize("command", ["train", "eval", "build-react"])
def test_the_cli_takes_cuda_n_and_refuses_a_misspelt_device_before_any_work(command, tmp_path):
    runner = CliRunner()
    help_text = runner.invoke(app, [command, "--help"], terminal_width=200).output
    assert "auto|cpu|cuda|cuda:N" in help_text
    result = runner.invoke(app, [command, "--device", "cuda:x"])
    assert result.exit_code == 2
    assert "unknown device 'cuda:x'" in result.output
