/* SPDX-License-Identifier: MIT */
/*
 * Log lines as native journal entries (issue 18): when systemd's journal is
 * the daemon's stderr (JOURNAL_STREAM names stderr's device and inode), or
 * always with --log-target journal, every message goes to journald through
 * sd_journal_send with its priority, category and structured fields, so
 * that `journalctl -u lupined -p err` and `journalctl SESSION=NAME` work.
 * Otherwise messages stay on stderr with a level word (common/log.c).
 */
#ifndef LUPD_JOURNAL_H
#define LUPD_JOURNAL_H

#include <stdbool.h>

/* target: enum lupd_log_target. Installs the journal sink where it applies. */
void lupd_journal_setup(int target);
/* Whether this process logs to the journal. */
bool lupd_journal_active(void);
/* Whether JOURNAL_STREAM names this process's stderr. */
bool lupd_journal_is_stderr(void);

#endif
