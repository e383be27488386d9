# tiocsti.py - can a command push keystrokes into the terminal it was started from
# (ioctl TIOCSTI, CVE-2017-5226 for bubblewrap)? Runs ARGV... on a fresh pty as its
# controlling terminal, as a shell would, and prints what the command printed.
# Usage: python3 tiocsti.py CMD... ; the command is expected to run PROBE below.
import os, pty, sys

pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
