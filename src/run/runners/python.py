# Vestibule session runner for python: one persistent interpreter, cells run like notebook
# cells in one set of globals (docs/design/sessions.md). The server sends each cell on fd 4 as
# "<seq> <length>\n" + code; after the cell ran, stdout and stderr are flushed and one record
# "<seq> <kind> <code>\n" goes to fd 5 (kind: ok, error, exit, interrupted). The user's stdout
# and stderr are the sandbox's own pipes, so nothing the code prints can end a cell.
import ast
import os
import signal
import sys
import traceback

CELL_IN, STATUS_OUT = 4, 5


def main():
    os.set_inheritable(CELL_IN, False)
    os.set_inheritable(STATUS_OUT, False)
    cells = os.fdopen(CELL_IN, "rb", buffering=0)
    state = {"in_cell": False}

    def on_sigint(signum, frame):
        # an interrupt that arrives between cells (the cell ended as the server gave up) is
        # dropped; inside a cell it is the notebook's KeyboardInterrupt
        if state["in_cell"]:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    user = {"__name__": "__main__", "__builtins__": __builtins__}

    def status(seq, kind, code):
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(STATUS_OUT, b"%d %s %d\n" % (seq, kind, code))

    def read_exact(n):
        buf = b""
        while len(buf) < n:
            chunk = cells.read(n - len(buf))
            if not chunk:
                sys.exit(0)
            buf += chunk
        return buf

    def read_line():
        buf = b""
        while not buf.endswith(b"\n"):
            c = cells.read(1)
            if not c:
                sys.exit(0)
            buf += c
        return buf

    status(0, b"ready", 0)
    while True:
        seq, length = (int(x) for x in read_line().split())
        src = read_exact(length).decode("utf-8", "replace")
        kind, code = b"ok", 0
        state["in_cell"] = True
        try:
            tree = ast.parse(src, "<cell %d>" % seq, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, "<cell %d>" % seq, "exec"), user)
            if last is not None:
                value = eval(compile(last, "<cell %d>" % seq, "eval"), user)
                if value is not None:
                    print(repr(value))
        except KeyboardInterrupt:
            print("KeyboardInterrupt", file=sys.stderr)
            kind, code = b"interrupted", 130
        except SystemExit as e:
            kind = b"exit"
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        except BaseException as e:
            # the runner's own frame is not the user's: the traceback starts at the cell
            traceback.print_exception(type(e), e, e.__traceback__.tb_next)
            kind, code = b"error", 1
        finally:
            state["in_cell"] = False
        status(seq, kind, code)


main()
