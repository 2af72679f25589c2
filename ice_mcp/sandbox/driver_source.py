"""The guest driver's source: Python that runs INSIDE the WebAssembly guest, never on the host.

It is kept as text (not a module) because it targets the guest's CPython 3.15,
must never be imported by the host, and is compiled once in the guest and
shipped as marshalled code (see cache.py).
"""

from typing import Final

DRIVER_SOURCE: Final = r'''
# The guest driver: runs INSIDE the WebAssembly guest (CPython 3.15 for WASI), never on the host.
# The host compiles it once in the guest and ships the marshalled code object (see cache.py).
#
# argv: ["-c", code, inputs_json, max_stdout_bytes, max_result_bytes, readable_roots]
# (readable_roots: guest folders, one per line, that the snippet may open read-only)
# It writes one JSON envelope to fd 1 and ends with posix._exit(0):
#   {"result": <json>, "stdout": str}  or  {"error": {"code", "message", "details"}, "stdout": str}
# It may not return: user code can exit, trap or be interrupted; the host handles those.
import json
import posix
import sys

import _ast


def _driver():
    # Held before the snippet runs, so replacing them from the snippet changes nothing here.
    exit_now, write, dumps, loads = posix._exit, posix.write, json.dumps, json.loads
    argv = sys.argv
    code, inputs_text = argv[1], argv[2]
    out_cap, result_cap = int(argv[3]), int(argv[4])
    roots = tuple(root.rstrip("/") + "/" for root in argv[5].split("\n") if root)
    # Sticky verdicts: user code may catch the exceptions, but not undo these.
    state = {"forbidden": None, "overflow": False}

    class OutputLimit(BaseException):
        """Raised past the cap; a BaseException so `except Exception` does not hide it."""

    class Capped:
        """sys.stdout/sys.stderr: keeps what is printed, up to the cap."""

        encoding = "utf-8"
        errors = "strict"

        def __init__(self, keep):
            self.parts = []
            self.keep = keep

        def write(self, s):
            if not isinstance(s, str):
                raise TypeError("write() argument must be str, not " + type(s).__name__)
            n = len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))
            total[0] += n
            if total[0] > out_cap:
                state["overflow"] = True
                raise OutputLimit("output is larger than " + str(out_cap) + " bytes")
            if self.keep:
                self.parts.append(s)
            return len(s)

        def writelines(self, lines):
            for line in lines:
                self.write(line)

        def flush(self):
            pass

        def isatty(self):
            return False

        def writable(self):
            return True

        def readable(self):
            return False

    total = [0]
    out = Capped(True)
    sys.stdout = out
    sys.stderr = Capped(False)

    # WASI's flag values are not Linux's (O_RDONLY is not 0), so ask the guest's own posix.
    write_flags = posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC | posix.O_APPEND

    def forbid(event, target):
        if state["forbidden"] is None:
            state["forbidden"] = (event, target)
        raise PermissionError(1, "forbidden in the sandbox: " + event, target)

    def audit(event, args):
        # A courtesy classifier only: the WebAssembly boundary is what contains the guest.
        if event == "open":
            path, flags = args[0], args[2]
            if isinstance(path, bytes):
                path = path.decode("utf-8", "surrogateescape")
            if isinstance(path, str):
                norm = posix_normpath(path)
                if norm.startswith(roots) and isinstance(flags, int) and not flags & write_flags:
                    return
            forbid(event, str(path)[:200])
        elif event.startswith(("os.", "shutil.", "socket.", "subprocess.", "ctypes.", "sqlite3.", "pty.", "fcntl.", "mmap.", "tempfile.", "glob.", "urllib.", "http.", "webbrowser.")):
            if event in ("os.putenv", "os.unsetenv", "sqlite3.connect/handle"):
                return
            if event == "sqlite3.connect" and args and args[0] in (":memory:", ""):
                return  # an in-memory database touches no file
            target = args[0] if args else ""
            forbid(event, repr(target)[:200])

    import posixpath

    import _socket

    def no_network(*args, **kwargs):
        forbid("socket.getaddrinfo", repr(args[:1])[:200])

    # This build has no resolver; make a lookup read as what it is, not as an AttributeError.
    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo"):
        if not hasattr(_socket, name):
            setattr(_socket, name, no_network)

    posix_normpath = posixpath.normpath

    def user_line(tb):
        line = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == "<code>":
                line = tb.tb_lineno
            tb = tb.tb_next
        return line

    def finish(members):
        # `members` is JSON text of the envelope's other members: the result is serialised once.
        # ASCII only: lone surrogates and any other odd text cross to the host intact.
        printed = dumps("".join(out.parts))
        view = memoryview(("{" + members + ',"stdout":' + printed + "}").encode("ascii"))
        while view:
            view = view[write(1, view):]
        exit_now(0)

    def fail(code, message, details=None):
        error = {"code": code, "message": message, "details": details or {}}
        finish('"error":' + dumps(error, default=repr))

    def build(source):
        tree = compile(source, "<code>", "exec", _ast.PyCF_ONLY_AST)
        body = tree.body or [_ast.Pass(lineno=1, col_offset=0, end_lineno=1, end_col_offset=0)]
        args = _ast.arguments(
            posonlyargs=[],
            args=[_ast.arg(arg="inputs", lineno=1, col_offset=0, end_lineno=1, end_col_offset=0)],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        )
        fn = _ast.FunctionDef(
            name="main", args=args, body=body, decorator_list=[], returns=None, type_params=[],
            lineno=1, col_offset=0, end_lineno=1, end_col_offset=0,
        )
        return compile(_ast.Module(body=[fn], type_ignores=[]), "<code>", "exec")

    inputs = loads(inputs_text)
    inputs_text = None
    try:
        program = build(code)
    except SyntaxError as e:
        fail("guest_exception", "SyntaxError: " + str(e.msg), {"type": "SyntaxError", "message": str(e.msg), "line": e.lineno})
    except (ValueError, MemoryError, RecursionError) as e:
        fail("guest_exception", type(e).__name__ + ": " + str(e), {"type": type(e).__name__, "message": str(e), "line": None})
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    sys.addaudithook(audit)
    error = None
    result = None
    try:
        exec(program, namespace)
        result = namespace["main"](inputs)
    except OutputLimit:
        pass
    except MemoryError:
        error = ("memory_limit", "the code ran out of memory", {})
    except BaseException as e:  # everything the snippet raised, SystemExit included
        name = type(e).__name__
        try:
            message = str(e)[:2000]
        except BaseException:  # an exception whose __str__ fails still gets reported
            message = "<unprintable " + name + ">"
        details = {"type": name, "message": message, "line": user_line(e.__traceback__)}
        if isinstance(e, OSError) and (e.errno is not None or "wasi" in message or "wasm" in message):
            error = ("forbidden", "not available in the sandbox: " + name + ": " + message, details)
        else:
            error = ("guest_exception", name + ": " + message, details)
        e = None
    if state["overflow"]:
        fail("output_limit", "printed output is larger than " + str(out_cap) + " bytes", {"limit_bytes": out_cap})
    if state["forbidden"] is not None:
        event, target = state["forbidden"]
        fail("forbidden", "forbidden in the sandbox: " + event + " " + target, {"event": event, "target": target})
    if error is not None:
        fail(*error)
    try:
        text = dumps(result, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as e:
        fail("not_json", "the result is not JSON: " + str(e)[:500], {"type": type(result).__name__, "message": str(e)[:500]})
    except MemoryError:
        fail("memory_limit", "the code ran out of memory", {})
    if len(text) > result_cap:
        fail("output_limit", "the result is larger than " + str(result_cap) + " bytes", {"limit_bytes": result_cap})
    result = None
    finish('"result":' + text)


_driver()
'''
