"""Submit and follow training jobs from Python (standard library only; Python 3.9+).

    from autopar import jobs

    job = jobs.submit(name="llm-training", command="python train.py",
                      gpu_type="A100", gpu_count=8, memory="64GiB",
                      nodes=2, time="04:00:00", requeue_on_failure=3,
                      model="llama-2-7b", auto_parallel=True, global_batch=512,
                      ckpt_upload="s3://bucket/ckpt")
    job.wait(timeout=3600)          # "COMPLETED", ... (Slurm's state)
    job.events()                    # the timeline `autopar events` prints, as Event objects
    job.checkpoints()               # the steps in storage: step, state, bytes, where
    job.plan()                      # the parallel plan the latest run used

A Python function runs as a job too (docs/python.md, "Functions"): `job = jobs.submit(fn, 3e-4,
folder="/shared/autopar-jobs", nodes=2)`, then `job.result()`; `jobs.Executor` holds the keywords
as submitit's executor does.

`submit` writes the batch script itself (docs/manual.md's form: `srun --mpi=pmix autopar-launch
-- COMMAND`) and hands it to sbatch on its standard input, so nothing is left on disk; the job's
shape and every autopar option go on sbatch's command line, where the plugin checks them. A value
the plugin or Slurm refuses raises SubmitError with that one line, and no job exists. See
docs/python.md for what each argument becomes on Slurm.
"""
from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from types import ModuleType
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union,
                    overload)

__all__ = ["submit", "wait_all", "as_completed", "Executor", "Job", "FunctionJob", "LocalJob", "Event", "SubmitError",
           "AUTOPAR_OPTIONS"]

# The plugin's options (spank/plugin.cpp registers core/options.cpp's table): Python name ->
# sbatch flag. test_python_jobs.py checks this against `sbatch --help`, so the two cannot drift.
AUTOPAR_OPTIONS = {
    "auto_parallel": "--auto-parallel",
    "model": "--model",
    "gpu_type": "--gpu-type",
    "global_batch": "--global-batch",
    "seq_len": "--seq-len",
    "ckpt_dir": "--ckpt-dir",
    "ckpt_upload": "--ckpt-upload",
    "ckpt_keep": "--ckpt-keep",
    "requeue_on_failure": "--requeue-on-failure",
    "heartbeat_timeout": "--heartbeat-timeout",
    "restarts_in_place": "--restarts-in-place",
    "spare_nodes": "--spare-nodes",
    "min_nodes": "--min-nodes",
    "on_bad_loss": "--on-bad-loss",
    "loss_spike": "--loss-spike",
    "idle_timeout": "--idle-timeout",
    "exclude_stragglers": "--exclude-stragglers",
    "fault_tolerance": "--fault-tolerance",
}
# Options that may be given alone (True): `--auto-parallel`, `--requeue-on-failure`.
_FLAG_ALONE = {"auto_parallel", "requeue_on_failure"}

# The planner's preset for the names people use (the seed's "A100"); others pass through.
GPU_TYPES = {"a100": "a100-80gb", "h100": "h100-80gb", "a100-80g": "a100-80gb",
             "a100-40g": "a100-40gb", "h100-80g": "h100-80gb"}

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT"}


class SubmitError(RuntimeError):
    """sbatch (the autopar plugin or Slurm itself) refused the job; the message is its line."""


class Event:
    """One line of the job's timeline (`autopar events --json`)."""

    __slots__ = ("time", "node", "rank", "step", "kind", "detail", "fields")

    def __init__(self, d: Mapping[str, Any]) -> None:
        self.time = d["time"]
        self.node = d.get("node", "")
        self.rank = d.get("rank", -1)
        self.step = d.get("step", -1)
        self.kind = d["kind"]
        self.detail = d.get("detail", "")
        self.fields = d.get("fields", {})

    def __repr__(self) -> str:
        return f"Event({self.kind!r}, node={self.node!r}, rank={self.rank}, step={self.step}, {self.fields!r})"


def _tool(env_name: str, name: str) -> str:
    path = os.environ.get(env_name) or shutil.which(name)
    if not path:
        raise FileNotFoundError(f"{name} not found (on PATH or in ${env_name})")
    return path


def _run(cmd: List[str], *, input: Optional[str] = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(cmd, input=input, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{cmd[0]}: {_one_line(p.stderr) or 'exit status ' + str(p.returncode)}")
    return p


def _one_line(stderr: str) -> str:
    """The line that says why: the autopar plugin's, else Slurm's first error line."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    for line in lines:
        if "autopar: " in line:
            return line[line.index("autopar: "):]
    for line in lines:
        if "error:" in line:
            return line[line.index("error:") + len("error:"):].strip()
    return lines[0] if lines else ""


def _memory_mib(value: object) -> int:
    """'64GiB', '64GB', '500MiB', '500M' -> MiB for --mem (Slurm's K/M/G/T are powers of 1024). A
    number without a unit is refused: Slurm would read 64 as 64 MiB, rarely what was meant."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)(B?)\s*", str(value), re.I)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or not m \
            or (m.group(3) and not m.group(4)):
        raise ValueError(f"memory: '{value}' is not a size like 64GiB, 64GB or 500MiB")
    if not m.group(2):
        raise ValueError(f"memory: '{value}' has no unit (Slurm would read it as {value} MiB): "
                         f"say '{value}GiB' or '{value}MiB'")
    number, unit, binary, byte = float(m.group(1)), m.group(2).upper(), m.group(3), m.group(4)
    power = "KMGT".index(unit) + 1
    base = 1024 if (binary or not byte) else 1000
    mib = number * base ** power / 1024 ** 2
    if mib <= 0:
        raise ValueError(f"memory: '{value}' must be more than 0")
    return int(math.ceil(mib))


# Slurm's forms of a time limit (sbatch(1) --time), all but a bare number of minutes.
_TIME_FORMS = re.compile(r"\d+:\d{1,2}(:\d{1,2})?|\d+-\d{1,2}(:\d{1,2}){0,2}", re.A)


def _time_limit(value: object) -> str:
    """A time limit for --time: a datetime.timedelta, or a string in one of Slurm's forms
    ('HH:MM:SS', 'MM:SS', 'D-HH', 'D-HH:MM', 'D-HH:MM:SS', 'UNLIMITED'). A bare number is refused:
    Slurm reads it as minutes, Python users as seconds."""
    if isinstance(value, _dt.timedelta):
        seconds = int(math.ceil(value.total_seconds()))
        if seconds <= 0:
            raise ValueError(f"time: {value} must be more than 0")
        days, rest = divmod(seconds, 86400)
        return f"{days}-{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    text = str(value).strip() if isinstance(value, str) else None
    if text and text.upper() in ("UNLIMITED", "INFINITE"):
        return text
    if text is None or not _TIME_FORMS.fullmatch(text):
        hint = (f" (Slurm would read {value} as minutes): give '{value // 3600:02d}:"
                f"{value % 3600 // 60:02d}:{value % 60:02d}' for {value} seconds, or a "
                f"datetime.timedelta") if isinstance(value, int) and not isinstance(value, bool) \
            and value > 0 else ": give 'HH:MM:SS', 'D-HH:MM:SS' or a datetime.timedelta"
        raise ValueError(f"time: {value!r} is not a time limit{hint}")
    return text


def _extra(value: object) -> List[str]:
    """Other sbatch options: a list of arguments, or one string split as a shell would."""
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as e:
            raise ValueError(f"extra: {value!r}: {e}") from None
    if not isinstance(value, (list, tuple)) or not all(isinstance(a, str) for a in value):
        raise ValueError(f"extra: must be a list of strings (or one string), got {value!r}")
    return list(value)


def _environment(env: object) -> Optional[Dict[str, str]]:
    """The variables to add to sbatch's environment: names are strings, values strings or numbers
    (numbers written as Python writes them)."""
    if env is None:
        return None
    if not isinstance(env, dict):
        raise ValueError(f"env: must be a dict of names to values, got {type(env).__name__}")
    out: Dict[str, str] = {}
    for name, value in env.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"env: {name!r} is not a variable name")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(f"env: {name}: {value!r} is not a string or a number")
        out[name] = str(value)
    return out


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: must be an integer >= 1, got {value!r}")
    return value


def _has_pyxis(sbatch: str) -> bool:
    return "--container-image" in _run([sbatch, "--help"], check=False).stdout


def sbatch_arguments(*, name: Optional[str] = None, nodes: Union[int, str, None] = None,
                     tasks_per_node: Optional[int] = None, gpu_count: Optional[int] = None,
                     gpu_type: Optional[str] = None, gres_type: Optional[str] = None,
                     cpus_per_task: Optional[int] = None, memory: Union[str, int, float, None] = None,
                     time: Union[str, _dt.timedelta, None] = None, partition: Optional[str] = None,
                     account: Optional[str] = None, qos: Optional[str] = None, output: Union[str, os.PathLike[str], None] = None,
                     error: Union[str, os.PathLike[str], None] = None, array: Union[str, int, None] = None, chdir: Union[str, os.PathLike[str], None] = None,
                     image: Optional[str] = None, sbatch: Optional[str] = None,
                     extra: Union[str, Sequence[str]] = (), **autopar: Any) -> List[str]:
    """The sbatch command-line arguments for these values (what submit passes); ValueError names
    the argument of a value that cannot be one."""
    args: List[str] = []
    if name is not None:
        args.append(f"--job-name={name}")
    if nodes is not None:
        if isinstance(nodes, str) and re.fullmatch(r"\d+-\d*", nodes):
            args.append(f"--nodes={nodes}")
        else:
            args.append(f"--nodes={_positive('nodes', nodes)}")
    if gpu_count is not None:
        _positive("gpu_count", gpu_count)
        args.append(f"--gpus-per-node={gres_type + ':' if gres_type else ''}{gpu_count}")
        if tasks_per_node is None:
            tasks_per_node = gpu_count  # one rank per GPU, as autopar-launch binds them
    if tasks_per_node is not None:
        args.append(f"--ntasks-per-node={_positive('tasks_per_node', tasks_per_node)}")
    if cpus_per_task is not None:
        args.append(f"--cpus-per-task={_positive('cpus_per_task', cpus_per_task)}")
    if memory is not None:
        args.append(f"--mem={_memory_mib(memory)}M")
    if time is not None:
        args.append(f"--time={_time_limit(time)}")
    for key, flag, value in (("partition", "--partition", partition),
                             ("account", "--account", account), ("qos", "--qos", qos),
                             ("output", "--output", output), ("error", "--error", error),
                             ("array", "--array", array), ("chdir", "--chdir", chdir)):
        if value is not None:
            if not str(value).strip():
                raise ValueError(f"{key}: must not be empty")
            args.append(f"{flag}={value}")
    if image is not None:
        if not _has_pyxis(sbatch or _tool("AUTOPAR_SBATCH", "sbatch")):
            raise ValueError(f"image: this site's sbatch has no --container-image (pyxis is not "
                             f"installed), so '{image}' cannot be used")
        args.append(f"--container-image={image}")
    if gpu_type is not None:
        autopar.setdefault("gpu_type", GPU_TYPES.get(str(gpu_type).lower(), str(gpu_type).lower()))
    for key, value in autopar.items():
        if key not in AUTOPAR_OPTIONS:
            raise TypeError(f"submit() got an unexpected keyword argument '{key}'")
        if value is None or value is False:
            continue
        flag = AUTOPAR_OPTIONS[key]
        if value is True:
            if key not in _FLAG_ALONE:
                raise ValueError(f"{key}: needs a value")
            args.append(flag)
        elif isinstance(value, dict):  # auto_parallel={"tp": 4, "pp": 2}, {"fsdp": True}, {"hsdp": (8, 4)}
            args.append(f"{flag}=" + ",".join(_pin(k, v) for k, v in value.items()))
        else:
            args.append(f"{flag}={value}")
    args.extend(_extra(extra))
    return args


def _pin(key: str, value: object) -> str:
    """One --auto-parallel item: "fsdp" for True, "hsdp=8,4" for a pair, else "tp=4"."""
    if value is True:
        return key
    if isinstance(value, (list, tuple)):
        return f"{key}=" + ",".join(str(v) for v in value)
    return f"{key}={value}"


def batch_script(command: Union[str, Sequence[object]], launcher: Optional[str] = None, mpi: str = "pmix") -> str:
    """The batch script of docs/manual.md: every task runs COMMAND under autopar-launch."""
    if isinstance(command, (list, tuple)):
        command = " ".join(shlex.quote(str(c)) for c in command)
    if not str(command).strip():
        raise ValueError("command: must not be empty")
    launch = launcher or _tool("AUTOPAR_LAUNCH", "autopar-launch")
    return (f"#!/bin/bash\n"
            f"# written by autopar.jobs.submit\n"
            f"srun --mpi={mpi} {shlex.quote(launch)} -- {command}\n")


@overload
def submit(command: Callable[..., Any], *args: Any, script: Optional[str] = None, env: Optional[Mapping[str, object]] = None,
           launcher: Optional[str] = None, kwargs: Optional[Mapping[str, Any]] = None,
           folder: Optional[str] = None, ranks: str = "0", local: bool = False, **options: Any) -> Union[FunctionJob, LocalJob]: ...
@overload
def submit(command: Union[str, Sequence[object], None] = None, *args: Any, script: Optional[str] = None, env: Optional[Mapping[str, object]] = None,
           launcher: Optional[str] = None, kwargs: Optional[Mapping[str, Any]] = None,
           folder: Optional[str] = None, ranks: str = "0", local: bool = False, **options: Any) -> Job: ...


def submit(command: Union[str, Sequence[object], Callable[..., Any], None] = None, *args: Any,
           script: Optional[str] = None, env: Optional[Mapping[str, object]] = None,
           launcher: Optional[str] = None, kwargs: Optional[Mapping[str, Any]] = None,
           folder: Optional[str] = None, ranks: str = "0", local: bool = False, **options: Any) -> Union[Job, LocalJob]:
    """Submits one job (or a job array with array="0-9") and returns its Job. `command` (a string
    or a list) runs on every task under autopar-launch; or `script` names an sbatch script to submit
    as it is; or `command` is a function, called as command(*args, **kwargs) in the job (on rank 0,
    or on every rank with ranks="all") and its value or exception returned by the Job's result():
    the call and its outcome travel through `folder` (default ./autopar-jobs, on a filesystem every
    node sees; autopar.functions), and local=True calls it here and now instead (no Slurm). The
    other keywords are Slurm's (sbatch_arguments) and autopar's (AUTOPAR_OPTIONS). Every argument
    is checked before Slurm is asked (ValueError or TypeError naming it, without sbatch on PATH
    too); SubmitError with the one line that refused it otherwise."""
    if callable(command):
        if script is not None:
            raise TypeError("submit: script= goes with a command, not with a function")
        return _submit_function(command, args, kwargs or {}, folder=folder, ranks=ranks, local=local,
                                env=env, launcher=launcher, **options)
    if args or kwargs is not None or folder is not None or local:
        raise TypeError("submit: args, kwargs=, folder= and local= go with a function (command=fn)")
    if (command is None) == (script is None):
        raise ValueError("submit: give exactly one of command= and script=")
    if command is not None and not isinstance(command, (str, list, tuple)):
        raise TypeError(f"command: a shell command (a string or a list of arguments) or a function, "
                        f"got {type(command).__name__}")
    extra_env = _environment(env)
    args = sbatch_arguments(**options)  # type: ignore[assignment]  # (no positional args here)
    if script is not None and not os.path.isfile(script):
        raise ValueError(f"script: {script}: no such file")
    text = batch_script(command, launcher) if command is not None else None
    job_id = _sbatch(args, text, script, extra_env)
    return Job(job_id, ckpt_upload=options.get("ckpt_upload"),
               stdout_path=_stdout_path(options, job_id))


def _sbatch(args: Sequence[str], text: Optional[str], script: Optional[str],
            extra_env: Optional[Mapping[str, str]]) -> str:
    """Runs sbatch; the job id, or SubmitError with the line that refused it."""
    sbatch = _tool("AUTOPAR_SBATCH", "sbatch")
    cmd = [sbatch, "--parsable", *args] + ([script] if script is not None else [])
    p = subprocess.run(cmd, input=text, capture_output=True, text=True,
                       env=None if extra_env is None else {**os.environ, **extra_env})
    if p.returncode != 0:
        raise SubmitError(_one_line(p.stderr) or f"sbatch: exit status {p.returncode}")
    job_id = p.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise SubmitError(f"sbatch: unexpected reply '{p.stdout.strip()}'")
    return job_id


def _submit_function(fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any], *,
                     folder: Optional[str], ranks: str, local: bool, env: Optional[Mapping[str, object]],
                     launcher: Optional[str], **options: Any) -> Union[FunctionJob, LocalJob]:
    if local:
        return LocalJob(fn, args, kwargs)
    if "array" in options:
        raise ValueError("array: a function job is one call; Executor.map_array makes an array of calls")
    return _submit_calls([(fn, tuple(args), dict(kwargs))], as_array=False, folder=folder,
                         ranks=ranks, env=env, launcher=launcher, **options)[0]


Call = Tuple[Callable[..., Any], Tuple[Any, ...], Dict[str, Any]]  # fn, args, kwargs


def _submit_calls(calls: Sequence[Call], *, as_array: bool, folder: Optional[str], ranks: str = "0",
                  env: Optional[Mapping[str, object]] = None, launcher: Optional[str] = None,
                  array_parallelism: Optional[int] = None, **options: Any) -> List[FunctionJob]:
    """One job for one call; or one Slurm array, task i making call i (its call and outcome in
    DIR/i). Nothing is left of them when sbatch refuses."""
    extra_env = _environment(env) or {}
    is_array = as_array
    if array_parallelism is not None:
        _positive("array_parallelism", array_parallelism)
    sbatch_arguments(**options)  # every value checked before a call is written
    call_dir = os.path.abspath(os.path.join(folder or "autopar-jobs", uuid.uuid4().hex))
    task_dir = os.path.join(call_dir, "%a") if is_array else call_dir
    options.setdefault("output", os.path.join(task_dir, "%A_%a.out" if is_array else "%j.out"))
    options.setdefault("error", os.path.join(task_dir, "%A_%a.err" if is_array else "%j.err"))
    if is_array:
        options["array"] = f"0-{len(calls) - 1}" + (f"%{array_parallelism}" if array_parallelism else "")
    # The job's Python finds this autopar and what the caller imports (a function of the caller's
    # module is pickled by reference; one of __main__ travels whole).
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [package_root] + [os.path.abspath(p) for p in sys.path if p and os.path.isdir(p)]
    extra_env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    text = batch_script([sys.executable, "-m", "autopar", "run-function", call_dir], launcher)
    _tool("AUTOPAR_SBATCH", "sbatch")  # before anything is written
    try:
        for i, (fn, args, kwargs) in enumerate(calls):
            _functions().write_call(os.path.join(call_dir, str(i)) if is_array else call_dir,
                                    fn, args, kwargs, ranks)
        job_id = _sbatch(sbatch_arguments(**options), text, None, extra_env)
    except BaseException:
        shutil.rmtree(call_dir, ignore_errors=True)  # no job: nothing of it is left
        raise
    if not is_array:
        return [FunctionJob(job_id, call_dir, ckpt_upload=options.get("ckpt_upload"),
                            stdout_path=_stdout_path(options, job_id),
                            stderr_path=_stdout_path({**options, "output": options["error"]}, job_id))]
    return [FunctionJob(f"{job_id}_{i}", os.path.join(call_dir, str(i)),
                        ckpt_upload=options.get("ckpt_upload"),
                        stdout_path=_stdout_path(options, job_id, i),
                        stderr_path=_stdout_path({**options, "output": options["error"]}, job_id, i))
            for i in range(len(calls))]


def _functions() -> ModuleType:
    from . import functions
    return functions


def _stdout_path(options: Mapping[str, Any], job_id: str, task: Optional[int] = None) -> Optional[str]:
    """Where Slurm writes the job's standard output (sbatch's --output pattern, else its default),
    for output() once the controller has forgotten the job; None when the pattern needs what only
    Slurm knows (a node, the name of a job submitted without one, an array task's own job id).
    `task`: a task of job array `job_id` (%A is the array's id, %a the task's index)."""
    pattern = str(options.get("output") or ("slurm-%A_%a.out" if options.get("array") else "slurm-%j.out"))
    name = options.get("name")
    parts = []
    for piece in pattern.split("%%"):  # %% is a literal %
        if task is None:
            piece = piece.replace("%j", job_id)
        else:
            piece = piece.replace("%A", job_id).replace("%a", str(task))
        if name:
            piece = piece.replace("%x", str(name))
        if "%" in piece:
            return None
        parts.append(piece)
    path = "%".join(parts)
    return path if os.path.isabs(path) else os.path.join(options.get("chdir") or os.getcwd(), path)


def wait_all(jobs: Iterable[Union[Job, LocalJob]], timeout: Optional[float] = None,
             poll: float = 1.0) -> Dict[str, str]:
    """Waits for every job (a sweep, or a job array's tasks); returns {job id: final state}, which is
    UNKNOWN for a job Slurm no longer knows (see Job.state). Raises TimeoutError naming the jobs
    still running when `timeout` seconds pass."""
    deadline = None if timeout is None else time.monotonic() + timeout
    states: Dict[str, str] = {}
    pending = list(jobs)
    while pending:
        for job in list(pending):
            s = job.state()
            if s in TERMINAL or s == "UNKNOWN":  # forgotten by Slurm: it has ended
                states[job.id] = s
                pending.remove(job)
        if not pending:
            break
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("jobs still running after %ss: %s" % (timeout, ", ".join(j.id for j in pending)))
        time.sleep(poll)
    return states


def as_completed(jobs: Iterable[Union[Job, LocalJob]], timeout: Optional[float] = None,
                 poll: float = 1.0) -> Iterator[Union[Job, LocalJob]]:
    """Yields each job as it ends (submitit's helpers.as_completed); TimeoutError naming the jobs
    still running when `timeout` seconds pass."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pending = list(jobs)
    while pending:
        for job in [j for j in pending if j.done()]:
            pending.remove(job)
            yield job
        if pending and deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("jobs still running after %ss: %s" % (timeout, ", ".join(j.id for j in pending)))
        if pending:
            time.sleep(poll)


class Job:
    """A Slurm job, followed through Slurm (state, output) and autopard (plan, events,
    checkpoints). `socket`: a node's autopard (default $AUTOPAR_SOCKET, else autopard's)."""

    def __init__(self, job_id: Union[str, int], socket: Optional[str] = None, ckpt_upload: Optional[str] = None,
                 stdout_path: Optional[str] = None, stderr_path: Optional[str] = None) -> None:
        self.id = str(job_id)
        self.stdout_path = stdout_path  # where submit expects its output (output() after Slurm forgot it)
        self.stderr_path = stderr_path
        self.socket = socket or os.environ.get("AUTOPAR_SOCKET") or "/run/autopard/autopard.sock"
        self.ckpt_upload = ckpt_upload  # where checkpoints() looks; else autopard's record of the job

    def __repr__(self) -> str:
        return f"Job({self.id!r})"

    def _records(self) -> List[Dict[str, str]]:
        """scontrol's records of the job: one, or one per task of a job array."""
        p = _run([_tool("AUTOPAR_SCONTROL", "scontrol"), "show", "job", "-o", self.id], check=False)
        if p.returncode != 0:
            return []
        records: List[Dict[str, str]] = []
        for line in p.stdout.splitlines():
            fields: Dict[str, str] = {}
            for m in re.finditer(r"(\w+(?:/\w+)?)=(\S*)", line):
                fields.setdefault(m.group(1), m.group(2))
            if fields:
                records.append(fields)
        return records

    def state(self) -> str:
        """Slurm's state: PENDING, RUNNING, REQUEUED, COMPLETING, COMPLETED, FAILED, CANCELLED, ...
        From scontrol while the controller knows the job, then from sacct (accounting); UNKNOWN
        when neither does (a job ended longer ago than MinJobAge, without accounting). For a job
        array: a task's state that is not final while any is, else COMPLETED when every task
        completed, else the first other final state."""
        if not self.id:
            raise RuntimeError("job not submitted yet: an Executor.batch() block submits its jobs when it ends")
        states = [r["JobState"] for r in self._records() if "JobState" in r]
        if not states:
            sacct = os.environ.get("AUTOPAR_SACCT") or shutil.which("sacct")
            if sacct:
                p = _run([sacct, "-n", "-X", "-P", "-o", "State", "-j", self.id], check=False)
                states = [line.split()[0] for line in p.stdout.splitlines() if line.strip()] \
                    if p.returncode == 0 else []
        if not states:
            return self._state_from_own_record()
        running = [s for s in states if s not in TERMINAL]
        if running:
            return running[0]
        failed = [s for s in states if s != "COMPLETED"]
        return failed[0] if failed else "COMPLETED"

    def _state_from_own_record(self) -> str:
        """The final state of a job Slurm has forgotten, from what autopar kept of it: its timeline's
        end (`autopar report`: rank 0 finished with exit 0 -> COMPLETED, autopard stopped it ->
        FAILED); UNKNOWN when that says neither (or autopard cannot be asked)."""
        try:
            p = _run([_tool("AUTOPAR_CLI", "autopar"), "report", self.id, "--json", "--socket",
                      self.socket], check=False)
            end = str(json.loads(p.stdout).get("end", "")) if p.returncode == 0 else ""
        except (FileNotFoundError, ValueError, AttributeError):
            return "UNKNOWN"
        if end == "finished exit=0":
            return "COMPLETED"
        return "FAILED" if end.startswith("stopped") else "UNKNOWN"

    def tasks(self) -> List[Job]:
        """The tasks of a job array, one Job each ("JOBID_TASK": state, output and cancel of that
        task alone); [] for a job that is not an array, or once the controller has forgotten it."""
        out = []
        for r in self._records():
            if r.get("ArrayTaskId", "N/A").isdigit() and "ArrayJobId" in r:
                out.append(Job(f"{r['ArrayJobId']}_{r['ArrayTaskId']}", socket=self.socket,
                               stdout_path=r.get("StdOut"), stderr_path=r.get("StdErr")))
        return sorted(out, key=lambda j: int(j.id.rsplit("_", 1)[1]))

    @property
    def job_id(self) -> str:
        """The job id (submitit's name for `id`)."""
        return self.id

    def done(self) -> bool:
        """Whether the job has ended (a final state, or forgotten by Slurm)."""
        return self.state() in TERMINAL | {"UNKNOWN"}

    def wait(self, timeout: Optional[float] = None, poll: float = 1.0) -> str:
        """Blocks until the job has ended (across requeues and in-place restarts); returns its
        final state. TimeoutError after `timeout` seconds."""
        return wait_all([self], timeout, poll)[self.id]

    def cancel(self) -> None:
        """Cancels the job (pending or running); nothing to do for one that has ended, or that Slurm
        no longer knows."""
        p = _run([_tool("AUTOPAR_SCANCEL", "scancel"), self.id], check=False)
        if p.returncode != 0 and self.state() not in TERMINAL | {"UNKNOWN"}:
            raise RuntimeError(f"scancel {self.id}: {_one_line(p.stderr)}")

    def output(self, lines: int = 50) -> str:
        """The last `lines` lines of the job's standard output file (where scontrol says, else where
        submit expected it: the job may be long forgotten by the controller). A job array's tasks
        each have their own: tasks()."""
        return self._tail("StdOut", self.stdout_path, lines)

    def stdout(self, lines: Optional[int] = None) -> str:
        """The job's standard output (all of it, or the last `lines` lines); "" when there is none."""
        return self._tail("StdOut", self.stdout_path, lines)

    def stderr(self, lines: Optional[int] = None) -> str:
        """The job's standard error (its --error file; the same as stdout when it has none)."""
        return self._tail("StdErr", self.stderr_path or self.stdout_path, lines)

    def _tail(self, field: str, expected: Optional[str], lines: Optional[int]) -> str:
        records = self._records()
        path = records[0].get(field) if records else expected
        if not path or not os.path.exists(path):
            return ""
        with open(path, errors="replace") as f:
            text = f.readlines()
        return "".join(text if lines is None else text[-lines:])

    def events(self) -> List[Event]:
        """The job's timeline across requeues and in-place restarts (every node's journal,
        merged), as Event objects in time order."""
        p = _run([_tool("AUTOPAR_CLI", "autopar"), "events", self.id, "--json", "--socket", self.socket])
        return [Event(e) for e in json.loads(p.stdout)["events"]]

    def plan(self) -> Optional[Dict[str, Any]]:
        """The parallel plan of the latest run, as the timeline holds it: the fields of its
        `submitted` event (model, gpus, tp, pp, dp, micro_batch, grad_accum, ...), updated by a later
        `resized` (plan_after); None when the job has no plan (no --auto-parallel) or has not
        started."""
        plan: Optional[Dict[str, Any]] = None
        for e in self.events():
            if e.kind == "submitted" and e.fields.get("plan") != "none":
                plan = dict(e.fields)
            elif e.kind == "resized" and plan is not None and "plan_after" in e.fields:
                plan.update(kv.split("=", 1) for kv in e.fields["plan_after"].split() if "=" in kv)
        return plan

    def checkpoints(self) -> List[Dict[str, Any]]:
        """The job's checkpoint steps in its --ckpt-upload storage, newest first: dicts with step,
        job_id, state (COMPLETE, INCOMPLETE), bytes, ranks and uri (`autopar ckpt ls --json` of the
        job's upload URI when submit knew it, else of the job id: what node's autopard knows);
        [] while there is none."""
        cli = _tool("AUTOPAR_CLI", "autopar")
        where = self.ckpt_upload or self.id
        p = _run([cli, "ckpt", "ls", where, "--json", "--socket", self.socket], check=False)
        if p.returncode != 0:
            if "no checkpoints of job" in p.stderr:
                return []
            raise RuntimeError(f"autopar ckpt ls: {_one_line(p.stderr)}")
        return [s for s in json.loads(p.stdout) if s.get("job_id") == self.id]


class FunctionJob(Job):
    """A job that calls a Python function (submit(fn, ...)): a Job, and its call's outcome."""

    def __init__(self, job_id: Union[str, int], call_dir: str, **kw: Any) -> None:
        super().__init__(job_id, **kw)
        self.call_dir = call_dir

    def result(self, timeout: Optional[float] = None, poll: float = 1.0) -> Any:
        """Waits for the job and returns the function's value (of the run that finished, across
        requeues and in-place restarts); raises the function's exception, its remote traceback in
        the exception's notes; RuntimeError when the job ended without an outcome."""
        outcome = self._outcome(timeout, poll)
        if outcome[0] == "ok":
            return outcome[1]
        raise outcome[1]

    def exception(self, timeout: Optional[float] = None, poll: float = 1.0) -> Optional[BaseException]:
        """Waits for the job; the function's exception, or None when it returned."""
        outcome = self._outcome(timeout, poll)
        return None if outcome[0] == "ok" else outcome[1]

    def results(self, timeout: Optional[float] = None, poll: float = 1.0) -> List[Any]:
        """Waits for the job; every rank's value in rank order (submitit's results()): one per task
        with ranks="all", [rank 0's] otherwise. Raises the first exception a rank raised, and
        RuntimeError naming a rank that left no outcome while a later one did."""
        values = [self.result(timeout, poll)]
        functions = _functions()
        last = max([int(m.group(1)) for m in (re.fullmatch(r"result-rank(\d+)\.pkl", n)
                                              for n in os.listdir(self.call_dir)) if m] or [0])
        for rank in range(1, last + 1):
            outcome = functions.read_outcome(self.call_dir, rank)
            if outcome is None:
                raise RuntimeError(f"job {self.id}: rank {rank} left no outcome (ranks after it did)")
            if outcome[0] != "ok":
                raise outcome[1]
            values.append(outcome[1])
        return values

    async def async_result(self, poll: float = 1.0) -> Any:
        """result() for asyncio (submitit's async_result()): waits without blocking the event loop."""
        while not await asyncio.to_thread(self.done):
            await asyncio.sleep(poll)
        return await asyncio.to_thread(self.result)

    def _state_from_own_record(self) -> str:
        """A forgotten function job's outcome file says how it ended (COMPLETED when the function
        returned, FAILED when it raised); else the timeline, as for any job."""
        outcome = _functions().read_outcome(self.call_dir)
        if outcome is not None:
            return "COMPLETED" if outcome[0] == "ok" else "FAILED"
        return super()._state_from_own_record()

    def _outcome(self, timeout: Optional[float], poll: float) -> Tuple[Any, ...]:
        state = self.wait(timeout, poll)
        outcome = _functions().read_outcome(self.call_dir)
        if outcome is None:
            tail = self.stderr(lines=5).strip()
            raise RuntimeError(f"job {self.id} ended {state} without the function's outcome"
                               + (f"; its stderr ends: {tail}" if tail else ""))
        if outcome[0] == "error" and hasattr(outcome[1], "add_note") and \
                not getattr(outcome[1], "_autopar_noted", False):
            outcome[1].add_note(f"in job {self.id}; the remote traceback:\n{outcome[2]}")
            outcome[1]._autopar_noted = True
        return outcome


class LocalJob:
    """submit(fn, ..., local=True): the call made here and now, behind a Job's surface (for tests
    and debugging without Slurm)."""

    def __init__(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        self.id = self.job_id = "local"
        try:
            self._outcome: Tuple[str, Any] = ("ok", fn(*args, **kwargs))
        except Exception as e:
            self._outcome = ("error", e)

    def state(self) -> str:
        return "COMPLETED" if self._outcome[0] == "ok" else "FAILED"

    def done(self) -> bool:
        return True

    def wait(self, timeout: Optional[float] = None, poll: float = 1.0) -> str:
        return self.state()

    def cancel(self) -> None:
        pass

    def result(self, timeout: Optional[float] = None, poll: float = 1.0) -> Any:
        if self._outcome[0] == "ok":
            return self._outcome[1]
        raise self._outcome[1]

    def exception(self, timeout: Optional[float] = None, poll: float = 1.0) -> Optional[BaseException]:
        return None if self._outcome[0] == "ok" else self._outcome[1]

    def results(self, timeout: Optional[float] = None, poll: float = 1.0) -> List[Any]:
        return [self.result()]

    async def async_result(self, poll: float = 1.0) -> Any:
        return self.result()


class Executor:
    """submitit's executor shape: holds submit's keywords (Slurm's, autopar's, folder, ranks, env,
    launcher, local) and submits functions with them.

        ex = jobs.Executor(folder="/shared/autopar-jobs", nodes=1, gpu_count=8)
        ex.update_parameters(time="01:00:00")
        job = ex.submit(train, 3e-4, steps=500)      # train(3e-4, steps=500) in the job
        jobs_ = ex.map_array(train, [1e-3, 3e-4])    # one Slurm array, a FunctionJob per task

        with ex.batch():                              # the calls inside, as one Slurm array
            jobs_ = [ex.submit(train, lr) for lr in (1e-3, 3e-4)]

    `array_parallelism=N` caps how many of an array's tasks run at once (sbatch --array=...%N).
    """

    _NOT_SBATCH = ("ranks", "env", "launcher", "local", "array_parallelism")

    def __init__(self, folder: str = "autopar-jobs", **parameters: Any) -> None:
        self.folder = folder
        self.parameters: Dict[str, Any] = {}
        self._batch: Optional[List[Tuple[Call, FunctionJob]]] = None
        self.update_parameters(**parameters)

    def update_parameters(self, **parameters: Any) -> None:
        """Sets keywords for the next submissions; a value that cannot be one is refused now,
        naming it."""
        if self._batch is not None:
            raise RuntimeError("Executor.update_parameters: not inside a batch() block (its jobs share one submission)")
        local = {k: parameters[k] for k in self._NOT_SBATCH if k in parameters}
        slurm = {k: v for k, v in parameters.items() if k not in local}
        if "array" in slurm:
            raise ValueError("array: map_array makes the array (array_parallelism=N caps it)")
        sbatch_arguments(**{**{k: v for k, v in self.parameters.items()
                               if k not in self._NOT_SBATCH}, **slurm})
        if "env" in local:
            _environment(local["env"])
        if local.get("array_parallelism") is not None:
            _positive("array_parallelism", local["array_parallelism"])
        self.parameters.update(parameters)

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Union[FunctionJob, LocalJob]:
        """Submits fn(*args, **kwargs) as a job; its FunctionJob (a LocalJob with local=True)."""
        if not callable(fn):
            raise TypeError(f"Executor.submit: a function, got {type(fn).__name__}")
        if self._batch is not None and not self.parameters.get("local"):
            shell = FunctionJob("", "")
            self._batch.append(((fn, tuple(args), dict(kwargs)), shell))
            return shell
        parameters = {k: v for k, v in self.parameters.items() if k != "array_parallelism"}
        return submit(fn, *args, kwargs=kwargs, folder=self.folder, **parameters)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """submit() inside the block collects its call; the block's end submits them all as one
        Slurm job array (submitit's executor.batch()). The jobs submit() returned inside are
        shells until then (asking one raises RuntimeError); an exception inside the block submits
        nothing, and so does a refusal at the end (SubmitError, every shell left unsubmitted)."""
        if self._batch is not None:
            raise RuntimeError("Executor.batch: already inside a batch() block")
        self._batch = []
        try:
            yield
            pending = self._batch
        finally:
            self._batch = None
        if not pending:
            return
        parameters = {k: v for k, v in self.parameters.items() if k != "local"}
        submitted = _submit_calls([call for call, _ in pending], as_array=True, folder=self.folder, **parameters)
        for (_, shell), job in zip(pending, submitted):
            shell.__dict__.update(job.__dict__)

    def map_array(self, fn: Callable[..., Any], *iterables: Iterable[Any]) -> List[Union[FunctionJob, LocalJob]]:
        """fn(a, b, ...) for each zip of `iterables`, as one Slurm job array (task i makes call
        i); a FunctionJob per task ("JOBID_i"), in their order. [] for no values."""
        if not callable(fn):
            raise TypeError(f"Executor.map_array: a function, got {type(fn).__name__}")
        calls: List[Call] = [(fn, tuple(v), {}) for v in zip(*iterables)]
        parameters = dict(self.parameters)
        if parameters.pop("local", False):
            return [LocalJob(f, args, kwargs) for f, args, kwargs in calls]
        if not calls:
            return []
        return list(_submit_calls(calls, as_array=True, folder=self.folder, **parameters))

