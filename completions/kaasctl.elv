
use builtin;
use str;

set edit:completion:arg-completer[kaasctl] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'kaasctl'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'kaasctl'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand brokers 'Brokers with their lease age and liveness'
            cand topics 'Topics: partitions, id, config overrides, and for compacted topics each partition''s dirty ratio and last cleaning'
            cand compaction 'The log cleaner per partition of compacted topics: dirty ratio, how far cleaning reached, what the last pass removed, failures'
            cand groups 'Consumer groups: committed offsets and lag per partition (real lag, lag blocked behind an open transaction, control records no consumer will see)'
            cand txn 'Transactions'
            cand fence 'Fence logs'
            cand markers 'The marker queue'
            cand producers 'Producer state of partitions'
            cand log 'Partition logs'
            cand lso 'Last stable offsets'
            cand audit 'The audit journal of mutating kaasctl commands'
            cand users 'SASL/SCRAM users brokers check logins against (salted verifiers only)'
            cand acls 'ACLs brokers enforce with --authorizer acls (Kafka''s model: deny wins)'
            cand quotas 'Client quotas brokers enforce: produce and fetch byte rates and request-time percentages per user and client id (Kafka''s model; docs/quotas.md)'
            cand doctor 'Check the volume and cluster from the outside: leases, clocks, slot files, disk space and inodes, stuck markers, hanging and overdue transactions, pinned LSOs. Prints a verdict and the next step for each finding; exit code 3 on a problem'
            cand metrics 'Transaction facts in Prometheus text format (for a textfile collector)'
            cand top 'The live dashboard: transactions, markers, fences, partitions, groups'
            cand completions 'Shell completions for kaasctl'
            cand man 'The kaasctl man page (roff) on stdout'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;brokers'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;topics'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;compaction'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;groups'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;txn'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
            cand list 'Every transaction on the volume (kafka-transactions.sh list / rpk cluster txn list)'
            cand show 'Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers (also `describe`, kafka-transactions.sh''s name)'
            cand describe 'Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers (also `describe`, kafka-transactions.sh''s name)'
            cand abort 'Force-abort an open transaction: PrepareAbort at epoch + 1, ABORT markers, staged offsets discarded, CompleteAbort'
            cand repair 'Check the whole volume; with --fix, repair what is inconsistent'
            cand find-hanging 'Exact hanging-transaction detection: partitions'' open transactions joined with the coordinator''s slots'
            cand timeline 'The recorded transition history of one transaction, with its fences and queued markers'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;txn;list'= {
            cand --state 'Only these states (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort); repeatable'
            cand --slot 'Only this slot (0..49)'
            cand --owner 'Only transactions coordinated by this broker'
            cand --older-than 'Only open transactions older than this (e.g. 5m, 1h30m)'
            cand --transactional-id 'Only transactional ids matching this glob (e.g. ''orders-*'')'
            cand --sort 'Sort order'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;txn;show'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;txn;describe'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;txn;abort'= {
            cand --wait 'How long to wait for brokers to write queued markers before leaving completion to them'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --dry-run 'Show the plan and change nothing'
            cand -y 'Do not ask for confirmation'
            cand --yes 'Do not ask for confirmation'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;txn;repair'= {
            cand --wait 'How long to wait for brokers to write queued markers of a finished transaction'
            cand --stuck-after 'A Prepare* transaction younger than this is left to its coordinator while any broker is live (its reaper finishes one within seconds)'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --fix 'Repair what was found (asks first unless --yes)'
            cand -y 'Do not ask for confirmation'
            cand --yes 'Do not ask for confirmation'
            cand --accept-slot-loss 'Rescue an unreadable slot even when that loses something in flight (its checkpoint does not parse, or a dropped journal line may have moved on a transaction that is Ongoing or Prepare*); refused otherwise'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;txn;find-hanging'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;txn;timeline'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;txn;help'= {
            cand list 'Every transaction on the volume (kafka-transactions.sh list / rpk cluster txn list)'
            cand show 'Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers (also `describe`, kafka-transactions.sh''s name)'
            cand abort 'Force-abort an open transaction: PrepareAbort at epoch + 1, ABORT markers, staged offsets discarded, CompleteAbort'
            cand repair 'Check the whole volume; with --fix, repair what is inconsistent'
            cand find-hanging 'Exact hanging-transaction detection: partitions'' open transactions joined with the coordinator''s slots'
            cand timeline 'The recorded transition history of one transaction, with its fences and queued markers'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;txn;help;list'= {
        }
        &'kaasctl;txn;help;show'= {
        }
        &'kaasctl;txn;help;abort'= {
        }
        &'kaasctl;txn;help;repair'= {
        }
        &'kaasctl;txn;help;find-hanging'= {
        }
        &'kaasctl;txn;help;timeline'= {
        }
        &'kaasctl;txn;help;help'= {
        }
        &'kaasctl;fence'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
            cand show 'Per writer (broker or admin): producer id, fenced epoch, when recorded'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;fence;show'= {
            cand --pid 'Only this producer id'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;fence;help'= {
            cand show 'Per writer (broker or admin): producer id, fenced epoch, when recorded'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;fence;help;show'= {
        }
        &'kaasctl;fence;help;help'= {
        }
        &'kaasctl;markers'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
            cand list 'Queue depth and oldest entry age per target broker'
            cand show 'Each queued entry: transaction, result, partitions'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;markers;list'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;markers;show'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;markers;help'= {
            cand list 'Queue depth and oldest entry age per target broker'
            cand show 'Each queued entry: transaction, result, partitions'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;markers;help;list'= {
        }
        &'kaasctl;markers;help;show'= {
        }
        &'kaasctl;markers;help;help'= {
        }
        &'kaasctl;producers'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
            cand show 'The partition''s producer-state snapshot plus the log tail replayed after it'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;producers;show'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;producers;help'= {
            cand show 'The partition''s producer-state snapshot plus the log tail replayed after it'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;producers;help;show'= {
        }
        &'kaasctl;producers;help;help'= {
        }
        &'kaasctl;log'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
            cand dump 'Batches of a partition log: offsets, producer id/epoch/sequence, flags, control type'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;log;dump'= {
            cand --from 'First offset to show'
            cand --count 'At most this many batches'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --records 'Also print each record''s key and value (uncompressed batches)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;log;help'= {
            cand dump 'Batches of a partition log: offsets, producer id/epoch/sequence, flags, control type'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;log;help;dump'= {
        }
        &'kaasctl;log;help;help'= {
        }
        &'kaasctl;lso'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
            cand explain 'Which producer and transaction pin a partition''s last stable offset, and what to do; without PARTITION, every partition of the topic'
            cand list 'The partitions whose last stable offset an open transaction holds back, the longest first'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;lso;explain'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;lso;list'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;lso;help'= {
            cand explain 'Which producer and transaction pin a partition''s last stable offset, and what to do; without PARTITION, every partition of the topic'
            cand list 'The partitions whose last stable offset an open transaction holds back, the longest first'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;lso;help;explain'= {
        }
        &'kaasctl;lso;help;list'= {
        }
        &'kaasctl;lso;help;help'= {
        }
        &'kaasctl;audit'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;users'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
            cand list 'Users and their SCRAM mechanisms with iteration counts'
            cand add 'Add a user, or change its password: the password is asked for on the terminal (twice, without echo) or read from stdin''s first line with --password-stdin'
            cand delete 'Delete a user''s credentials (all mechanisms, or those named)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;users;list'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;users;add'= {
            cand --mechanism 'SCRAM-SHA-256 or SCRAM-SHA-512; repeat for both (the default). PLAIN logins are checked against these verifiers too'
            cand --iterations 'PBKDF2 iterations (4096..=16384)'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --password-stdin 'Read the password from the first line of stdin'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;users;delete'= {
            cand --mechanism 'mechanism'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;users;help'= {
            cand list 'Users and their SCRAM mechanisms with iteration counts'
            cand add 'Add a user, or change its password: the password is asked for on the terminal (twice, without echo) or read from stdin''s first line with --password-stdin'
            cand delete 'Delete a user''s credentials (all mechanisms, or those named)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;users;help;list'= {
        }
        &'kaasctl;users;help;add'= {
        }
        &'kaasctl;users;help;delete'= {
        }
        &'kaasctl;users;help;help'= {
        }
        &'kaasctl;acls'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
            cand list 'ACLs, all or those about one resource or principal'
            cand add 'Add ACLs: each principal × host × operation on one resource, like kafka-acls --add (e.g. --allow-principal User:alice --operation write --topic orders)'
            cand delete 'Delete the ACLs the same flags as `add` describe'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;acls;list'= {
            cand --topic 'A topic (''*'' for every topic)'
            cand --group 'A consumer group (''*'' for every group)'
            cand --transactional-id 'A transactional id (''*'' for every id)'
            cand --resource-pattern-type 'How the resource name matches: any (ACLs with exactly this name), match (every ACL that applies to it: literal, ''*'' and prefixes), literal, prefixed'
            cand --principal 'Only ACLs naming this principal (User:alice)'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --cluster 'The cluster (kafka-cluster)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;acls;add'= {
            cand --topic 'A topic (''*'' for every topic)'
            cand --group 'A consumer group (''*'' for every group)'
            cand --transactional-id 'A transactional id (''*'' for every id)'
            cand --allow-principal 'Principals allowed (User:alice, User:* for everyone); repeatable'
            cand --deny-principal 'Principals denied; a DENY wins over any ALLOW. Repeatable'
            cand --operation 'Operations: all, read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write. Repeatable'
            cand --host 'Client addresses the ACL applies to (''*'': any). Repeatable'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --cluster 'The cluster (kafka-cluster)'
            cand --prefixed 'The name is a prefix (PREFIXED), not a literal name'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;acls;delete'= {
            cand --topic 'A topic (''*'' for every topic)'
            cand --group 'A consumer group (''*'' for every group)'
            cand --transactional-id 'A transactional id (''*'' for every id)'
            cand --allow-principal 'Principals allowed (User:alice, User:* for everyone); repeatable'
            cand --deny-principal 'Principals denied; a DENY wins over any ALLOW. Repeatable'
            cand --operation 'Operations: all, read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write. Repeatable'
            cand --host 'Client addresses the ACL applies to (''*'': any). Repeatable'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --cluster 'The cluster (kafka-cluster)'
            cand --prefixed 'The name is a prefix (PREFIXED), not a literal name'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;acls;help'= {
            cand list 'ACLs, all or those about one resource or principal'
            cand add 'Add ACLs: each principal × host × operation on one resource, like kafka-acls --add (e.g. --allow-principal User:alice --operation write --topic orders)'
            cand delete 'Delete the ACLs the same flags as `add` describe'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;acls;help;list'= {
        }
        &'kaasctl;acls;help;add'= {
        }
        &'kaasctl;acls;help;delete'= {
        }
        &'kaasctl;acls;help;help'= {
        }
        &'kaasctl;quotas'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
            cand list 'Quotas, all or those of the entities matching the names given (a component not given may be anything)'
            cand set 'Set quotas on an entity: KEY=VALUE with producer_byte_rate and consumer_byte_rate in bytes per second, request_percentage in percent of one thread'
            cand delete 'Delete an entity''s quotas: those named, or all'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;quotas;list'= {
            cand --user 'The user (the principal''s name: alice for User:alice)'
            cand --client-id 'The client id'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --default-user 'The default for users without a quota of their own'
            cand --default-client-id 'The default for client ids without a quota of their own'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;quotas;set'= {
            cand --user 'The user (the principal''s name: alice for User:alice)'
            cand --client-id 'The client id'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --default-user 'The default for users without a quota of their own'
            cand --default-client-id 'The default for client ids without a quota of their own'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;quotas;delete'= {
            cand --user 'The user (the principal''s name: alice for User:alice)'
            cand --client-id 'The client id'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --default-user 'The default for users without a quota of their own'
            cand --default-client-id 'The default for client ids without a quota of their own'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;quotas;help'= {
            cand list 'Quotas, all or those of the entities matching the names given (a component not given may be anything)'
            cand set 'Set quotas on an entity: KEY=VALUE with producer_byte_rate and consumer_byte_rate in bytes per second, request_percentage in percent of one thread'
            cand delete 'Delete an entity''s quotas: those named, or all'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;quotas;help;list'= {
        }
        &'kaasctl;quotas;help;set'= {
        }
        &'kaasctl;quotas;help;delete'= {
        }
        &'kaasctl;quotas;help;help'= {
        }
        &'kaasctl;doctor'= {
            cand --stuck-after 'A marker entry, Prepare* transaction or pinned LSO older than this is stuck'
            cand --lso-pinned-after 'A last stable offset held back longer than this by a transaction still within its timeout is a warning (read_committed consumers wait behind it)'
            cand --min-free-percent 'Free space or inodes below this percentage is a problem (below twice it, a warning)'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;metrics'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;top'= {
            cand --interval 'Refresh period'
            cand --view 'The view to start in'
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --once 'Render one frame as plain text to stdout and exit (size from COLUMNS/LINES, default 120x40)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;completions'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;man'= {
            cand --data-dir 'The shared volume (the brokers'' --data-dir)'
            cand -o 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --output 'Output format: tables for people, JSON or YAML (the same fields) for scripts'
            cand --columns 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state'''
            cand --color 'When to colour tables (NO_COLOR in the environment means never)'
            cand --session-timeout 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)'
            cand --json 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
            cand --wide 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
            cand --allow-other-user 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'kaasctl;help'= {
            cand brokers 'Brokers with their lease age and liveness'
            cand topics 'Topics: partitions, id, config overrides, and for compacted topics each partition''s dirty ratio and last cleaning'
            cand compaction 'The log cleaner per partition of compacted topics: dirty ratio, how far cleaning reached, what the last pass removed, failures'
            cand groups 'Consumer groups: committed offsets and lag per partition (real lag, lag blocked behind an open transaction, control records no consumer will see)'
            cand txn 'Transactions'
            cand fence 'Fence logs'
            cand markers 'The marker queue'
            cand producers 'Producer state of partitions'
            cand log 'Partition logs'
            cand lso 'Last stable offsets'
            cand audit 'The audit journal of mutating kaasctl commands'
            cand users 'SASL/SCRAM users brokers check logins against (salted verifiers only)'
            cand acls 'ACLs brokers enforce with --authorizer acls (Kafka''s model: deny wins)'
            cand quotas 'Client quotas brokers enforce: produce and fetch byte rates and request-time percentages per user and client id (Kafka''s model; docs/quotas.md)'
            cand doctor 'Check the volume and cluster from the outside: leases, clocks, slot files, disk space and inodes, stuck markers, hanging and overdue transactions, pinned LSOs. Prints a verdict and the next step for each finding; exit code 3 on a problem'
            cand metrics 'Transaction facts in Prometheus text format (for a textfile collector)'
            cand top 'The live dashboard: transactions, markers, fences, partitions, groups'
            cand completions 'Shell completions for kaasctl'
            cand man 'The kaasctl man page (roff) on stdout'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'kaasctl;help;brokers'= {
        }
        &'kaasctl;help;topics'= {
        }
        &'kaasctl;help;compaction'= {
        }
        &'kaasctl;help;groups'= {
        }
        &'kaasctl;help;txn'= {
            cand list 'Every transaction on the volume (kafka-transactions.sh list / rpk cluster txn list)'
            cand show 'Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers (also `describe`, kafka-transactions.sh''s name)'
            cand abort 'Force-abort an open transaction: PrepareAbort at epoch + 1, ABORT markers, staged offsets discarded, CompleteAbort'
            cand repair 'Check the whole volume; with --fix, repair what is inconsistent'
            cand find-hanging 'Exact hanging-transaction detection: partitions'' open transactions joined with the coordinator''s slots'
            cand timeline 'The recorded transition history of one transaction, with its fences and queued markers'
        }
        &'kaasctl;help;txn;list'= {
        }
        &'kaasctl;help;txn;show'= {
        }
        &'kaasctl;help;txn;abort'= {
        }
        &'kaasctl;help;txn;repair'= {
        }
        &'kaasctl;help;txn;find-hanging'= {
        }
        &'kaasctl;help;txn;timeline'= {
        }
        &'kaasctl;help;fence'= {
            cand show 'Per writer (broker or admin): producer id, fenced epoch, when recorded'
        }
        &'kaasctl;help;fence;show'= {
        }
        &'kaasctl;help;markers'= {
            cand list 'Queue depth and oldest entry age per target broker'
            cand show 'Each queued entry: transaction, result, partitions'
        }
        &'kaasctl;help;markers;list'= {
        }
        &'kaasctl;help;markers;show'= {
        }
        &'kaasctl;help;producers'= {
            cand show 'The partition''s producer-state snapshot plus the log tail replayed after it'
        }
        &'kaasctl;help;producers;show'= {
        }
        &'kaasctl;help;log'= {
            cand dump 'Batches of a partition log: offsets, producer id/epoch/sequence, flags, control type'
        }
        &'kaasctl;help;log;dump'= {
        }
        &'kaasctl;help;lso'= {
            cand explain 'Which producer and transaction pin a partition''s last stable offset, and what to do; without PARTITION, every partition of the topic'
            cand list 'The partitions whose last stable offset an open transaction holds back, the longest first'
        }
        &'kaasctl;help;lso;explain'= {
        }
        &'kaasctl;help;lso;list'= {
        }
        &'kaasctl;help;audit'= {
        }
        &'kaasctl;help;users'= {
            cand list 'Users and their SCRAM mechanisms with iteration counts'
            cand add 'Add a user, or change its password: the password is asked for on the terminal (twice, without echo) or read from stdin''s first line with --password-stdin'
            cand delete 'Delete a user''s credentials (all mechanisms, or those named)'
        }
        &'kaasctl;help;users;list'= {
        }
        &'kaasctl;help;users;add'= {
        }
        &'kaasctl;help;users;delete'= {
        }
        &'kaasctl;help;acls'= {
            cand list 'ACLs, all or those about one resource or principal'
            cand add 'Add ACLs: each principal × host × operation on one resource, like kafka-acls --add (e.g. --allow-principal User:alice --operation write --topic orders)'
            cand delete 'Delete the ACLs the same flags as `add` describe'
        }
        &'kaasctl;help;acls;list'= {
        }
        &'kaasctl;help;acls;add'= {
        }
        &'kaasctl;help;acls;delete'= {
        }
        &'kaasctl;help;quotas'= {
            cand list 'Quotas, all or those of the entities matching the names given (a component not given may be anything)'
            cand set 'Set quotas on an entity: KEY=VALUE with producer_byte_rate and consumer_byte_rate in bytes per second, request_percentage in percent of one thread'
            cand delete 'Delete an entity''s quotas: those named, or all'
        }
        &'kaasctl;help;quotas;list'= {
        }
        &'kaasctl;help;quotas;set'= {
        }
        &'kaasctl;help;quotas;delete'= {
        }
        &'kaasctl;help;doctor'= {
        }
        &'kaasctl;help;metrics'= {
        }
        &'kaasctl;help;top'= {
        }
        &'kaasctl;help;completions'= {
        }
        &'kaasctl;help;man'= {
        }
        &'kaasctl;help;help'= {
        }
    ]
    $completions[$command]
}
