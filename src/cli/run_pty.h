/* run_pty.h - the terminal of `vestibule-mcp run -- CMD`: when any of fds 0-2 is a terminal, the
 * command gets a pty of our own (its controlling terminal, as fds 0-2 where ours are terminals) and
 * a thread copies between it and the real terminal, which is put in raw mode for the run and
 * restored after. So the command never holds the user's terminal: TIOCSTI reaches only its own
 * pty, and a backgrounded run cannot read what is typed for the shell: the relay reads the real
 * terminal and sets its modes only while the run's process group is the terminal's foreground
 * one (tcgetpgrp(3)), so a background run never stops on SIGTTIN or SIGTTOU and its SIGTERM
 * still ends it. pty(7), termios(3), tests/adversarial/server.md (red team of `run --` #5). */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <termios.h>

struct run_pty {
        int master, slave; /* -1 when not open */
        int stop[2];       /* the relay's stop pipe */
        int out_fd;        /* where the pty's output goes: 1, 2 or 0, the first a terminal */
        int tty_fd;        /* the first of fds 0-2 that is a terminal (its size, its modes) */
        bool input;        /* fd 0 is a terminal: its input is relayed, its modes made raw */
        struct termios saved;
        bool have_saved, thread_on;
        bool raw_on; /* the real terminal is in raw mode (set in the foreground only) */
        pthread_t thread;
};

/**
 * run_pty_start() - when any of fds 0-2 is a terminal: a new pty whose size and modes are the
 * first terminal's, and the relay thread started. When fd 0 is one, fd 0 goes in raw mode once
 * the run is the foreground job (at once, or when the relay sees it brought there) and what is
 * typed is relayed; when only fd 1 or 2 is, the relay copies output only (the slave without
 * output processing, which the real terminal does) and the real terminal's modes are never
 * touched. @p is filled; ->slave is the fd to hand the command in place of each terminal fd
 * (closed by run_pty_stop()).
 * Return: 1 started, 0 none of fds 0-2 is a terminal (nothing done; ->slave -1), -errno when
 * the pty could not be made (said on stderr; the run must not fall back to the real terminal).
 */
int run_pty_start(struct run_pty *p);

/**
 * run_pty_stop() - after the run: what the command wrote to its pty copied out, the relay
 * stopped, the real terminal's modes put back (TCSADRAIN), every fd closed. Safe on a @p that
 * run_pty_start() left unstarted.
 */
void run_pty_stop(struct run_pty *p);
