# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_kaasctl_global_optspecs
    string join \n data-dir= json o/output= wide columns= color= session-timeout= allow-other-user h/help V/version
end

function __fish_kaasctl_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_kaasctl_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_kaasctl_using_subcommand
    set -l cmd (__fish_kaasctl_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c kaasctl -n "__fish_kaasctl_needs_command" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_needs_command" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_needs_command" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_needs_command" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_needs_command" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_needs_command" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -s V -l version -d 'Print version'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "brokers" -d 'Brokers with their lease age and liveness'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "topics" -d 'Topics: partitions, id, config overrides, and for compacted topics each partition\'s dirty ratio and last cleaning'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "compaction" -d 'The log cleaner per partition of compacted topics: dirty ratio, how far cleaning reached, what the last pass removed, failures'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "groups" -d 'Consumer groups: committed offsets and lag per partition (real lag, lag blocked behind an open transaction, control records no consumer will see)'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "txn" -d 'Transactions'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "fence" -d 'Fence logs'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "markers" -d 'The marker queue'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "producers" -d 'Producer state of partitions'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "log" -d 'Partition logs'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "lso" -d 'Last stable offsets'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "audit" -d 'The audit journal of mutating kaasctl commands'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "users" -d 'SASL/SCRAM users brokers check logins against (salted verifiers only)'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "acls" -d 'ACLs brokers enforce with --authorizer acls (Kafka\'s model: deny wins)'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "quotas" -d 'Client quotas brokers enforce: produce and fetch byte rates and request-time percentages per user and client id (Kafka\'s model; docs/quotas.md)'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "doctor" -d 'Check the volume and cluster from the outside: leases, clocks, slot files, disk space and inodes, stuck markers, hanging and overdue transactions, pinned LSOs. Prints a verdict and the next step for each finding; exit code 3 on a problem'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "metrics" -d 'Transaction facts in Prometheus text format (for a textfile collector)'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "top" -d 'The live dashboard: transactions, markers, fences, partitions, groups'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "completions" -d 'Shell completions for kaasctl'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "man" -d 'The kaasctl man page (roff) on stdout'
complete -c kaasctl -n "__fish_kaasctl_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand brokers" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand brokers" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand brokers" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand brokers" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand brokers" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand brokers" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand brokers" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand brokers" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand brokers" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand topics" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand topics" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand topics" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand topics" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand topics" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand topics" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand topics" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand topics" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand topics" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand compaction" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand compaction" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand compaction" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand compaction" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand compaction" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand compaction" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand compaction" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand compaction" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand compaction" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand groups" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand groups" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand groups" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand groups" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand groups" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand groups" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand groups" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand groups" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand groups" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -f -a "list" -d 'Every transaction on the volume (kafka-transactions.sh list / rpk cluster txn list)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -f -a "show" -d 'Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers (also `describe`, kafka-transactions.sh\'s name)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -f -a "describe" -d 'Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers (also `describe`, kafka-transactions.sh\'s name)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -f -a "abort" -d 'Force-abort an open transaction: PrepareAbort at epoch + 1, ABORT markers, staged offsets discarded, CompleteAbort'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -f -a "repair" -d 'Check the whole volume; with --fix, repair what is inconsistent'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -f -a "find-hanging" -d 'Exact hanging-transaction detection: partitions\' open transactions joined with the coordinator\'s slots'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -f -a "timeline" -d 'The recorded transition history of one transaction, with its fences and queued markers'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and not __fish_seen_subcommand_from list show describe abort repair find-hanging timeline help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l state -d 'Only these states (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort); repeatable' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l slot -d 'Only this slot (0..49)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l owner -d 'Only transactions coordinated by this broker' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l older-than -d 'Only open transactions older than this (e.g. 5m, 1h30m)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l transactional-id -d 'Only transactional ids matching this glob (e.g. \'orders-*\')' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l sort -d 'Sort order' -r -f -a "id\t''
age\t''
state\t''
pid\t''
slot\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from show" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from show" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from show" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from show" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from show" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from show" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from show" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from show" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from describe" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from describe" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from describe" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from describe" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from describe" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from describe" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from describe" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from describe" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from describe" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from abort" -l wait -d 'How long to wait for brokers to write queued markers before leaving completion to them' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from abort" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from abort" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from abort" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from abort" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from abort" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from abort" -l dry-run -d 'Show the plan and change nothing'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from abort" -s y -l yes -d 'Do not ask for confirmation'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from abort" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from abort" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from abort" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from abort" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -l wait -d 'How long to wait for brokers to write queued markers of a finished transaction' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -l stuck-after -d 'A Prepare* transaction younger than this is left to its coordinator while any broker is live (its reaper finishes one within seconds)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -l fix -d 'Repair what was found (asks first unless --yes)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -s y -l yes -d 'Do not ask for confirmation'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -l accept-slot-loss -d 'Rescue an unreadable slot even when that loses something in flight (its checkpoint does not parse, or a dropped journal line may have moved on a transaction that is Ongoing or Prepare*); refused otherwise'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from repair" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from find-hanging" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from find-hanging" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from find-hanging" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from find-hanging" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from find-hanging" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from find-hanging" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from find-hanging" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from find-hanging" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from find-hanging" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from timeline" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from timeline" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from timeline" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from timeline" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from timeline" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from timeline" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from timeline" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from timeline" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from timeline" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from help" -f -a "list" -d 'Every transaction on the volume (kafka-transactions.sh list / rpk cluster txn list)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from help" -f -a "show" -d 'Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers (also `describe`, kafka-transactions.sh\'s name)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from help" -f -a "abort" -d 'Force-abort an open transaction: PrepareAbort at epoch + 1, ABORT markers, staged offsets discarded, CompleteAbort'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from help" -f -a "repair" -d 'Check the whole volume; with --fix, repair what is inconsistent'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from help" -f -a "find-hanging" -d 'Exact hanging-transaction detection: partitions\' open transactions joined with the coordinator\'s slots'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from help" -f -a "timeline" -d 'The recorded transition history of one transaction, with its fences and queued markers'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand txn; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and not __fish_seen_subcommand_from show help" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and not __fish_seen_subcommand_from show help" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and not __fish_seen_subcommand_from show help" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and not __fish_seen_subcommand_from show help" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and not __fish_seen_subcommand_from show help" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and not __fish_seen_subcommand_from show help" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and not __fish_seen_subcommand_from show help" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and not __fish_seen_subcommand_from show help" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and not __fish_seen_subcommand_from show help" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and not __fish_seen_subcommand_from show help" -f -a "show" -d 'Per writer (broker or admin): producer id, fenced epoch, when recorded'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and not __fish_seen_subcommand_from show help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and __fish_seen_subcommand_from show" -l pid -d 'Only this producer id' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and __fish_seen_subcommand_from show" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and __fish_seen_subcommand_from show" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and __fish_seen_subcommand_from show" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and __fish_seen_subcommand_from show" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and __fish_seen_subcommand_from show" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and __fish_seen_subcommand_from show" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and __fish_seen_subcommand_from show" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and __fish_seen_subcommand_from show" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and __fish_seen_subcommand_from help" -f -a "show" -d 'Per writer (broker or admin): producer id, fenced epoch, when recorded'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand fence; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and not __fish_seen_subcommand_from list show help" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and not __fish_seen_subcommand_from list show help" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and not __fish_seen_subcommand_from list show help" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and not __fish_seen_subcommand_from list show help" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and not __fish_seen_subcommand_from list show help" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and not __fish_seen_subcommand_from list show help" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and not __fish_seen_subcommand_from list show help" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and not __fish_seen_subcommand_from list show help" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and not __fish_seen_subcommand_from list show help" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and not __fish_seen_subcommand_from list show help" -f -a "list" -d 'Queue depth and oldest entry age per target broker'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and not __fish_seen_subcommand_from list show help" -f -a "show" -d 'Each queued entry: transaction, result, partitions'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and not __fish_seen_subcommand_from list show help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from list" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from list" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from list" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from list" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from list" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from list" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from list" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from show" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from show" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from show" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from show" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from show" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from show" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from show" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from show" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from help" -f -a "list" -d 'Queue depth and oldest entry age per target broker'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from help" -f -a "show" -d 'Each queued entry: transaction, result, partitions'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand markers; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and not __fish_seen_subcommand_from show help" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and not __fish_seen_subcommand_from show help" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and not __fish_seen_subcommand_from show help" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and not __fish_seen_subcommand_from show help" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and not __fish_seen_subcommand_from show help" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and not __fish_seen_subcommand_from show help" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and not __fish_seen_subcommand_from show help" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and not __fish_seen_subcommand_from show help" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and not __fish_seen_subcommand_from show help" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and not __fish_seen_subcommand_from show help" -f -a "show" -d 'The partition\'s producer-state snapshot plus the log tail replayed after it'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and not __fish_seen_subcommand_from show help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and __fish_seen_subcommand_from show" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and __fish_seen_subcommand_from show" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and __fish_seen_subcommand_from show" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and __fish_seen_subcommand_from show" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and __fish_seen_subcommand_from show" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and __fish_seen_subcommand_from show" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and __fish_seen_subcommand_from show" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and __fish_seen_subcommand_from show" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and __fish_seen_subcommand_from help" -f -a "show" -d 'The partition\'s producer-state snapshot plus the log tail replayed after it'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand producers; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and not __fish_seen_subcommand_from dump help" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and not __fish_seen_subcommand_from dump help" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and not __fish_seen_subcommand_from dump help" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and not __fish_seen_subcommand_from dump help" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and not __fish_seen_subcommand_from dump help" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and not __fish_seen_subcommand_from dump help" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and not __fish_seen_subcommand_from dump help" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and not __fish_seen_subcommand_from dump help" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and not __fish_seen_subcommand_from dump help" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and not __fish_seen_subcommand_from dump help" -f -a "dump" -d 'Batches of a partition log: offsets, producer id/epoch/sequence, flags, control type'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and not __fish_seen_subcommand_from dump help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from dump" -l from -d 'First offset to show' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from dump" -l count -d 'At most this many batches' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from dump" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from dump" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from dump" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from dump" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from dump" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from dump" -l records -d 'Also print each record\'s key and value (uncompressed batches)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from dump" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from dump" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from dump" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from dump" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from help" -f -a "dump" -d 'Batches of a partition log: offsets, producer id/epoch/sequence, flags, control type'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand log; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and not __fish_seen_subcommand_from explain list help" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and not __fish_seen_subcommand_from explain list help" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and not __fish_seen_subcommand_from explain list help" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and not __fish_seen_subcommand_from explain list help" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and not __fish_seen_subcommand_from explain list help" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and not __fish_seen_subcommand_from explain list help" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and not __fish_seen_subcommand_from explain list help" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and not __fish_seen_subcommand_from explain list help" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and not __fish_seen_subcommand_from explain list help" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and not __fish_seen_subcommand_from explain list help" -f -a "explain" -d 'Which producer and transaction pin a partition\'s last stable offset, and what to do; without PARTITION, every partition of the topic'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and not __fish_seen_subcommand_from explain list help" -f -a "list" -d 'The partitions whose last stable offset an open transaction holds back, the longest first'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and not __fish_seen_subcommand_from explain list help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from explain" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from explain" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from explain" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from explain" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from explain" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from explain" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from explain" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from explain" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from explain" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from list" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from list" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from list" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from list" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from list" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from list" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from list" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from help" -f -a "explain" -d 'Which producer and transaction pin a partition\'s last stable offset, and what to do; without PARTITION, every partition of the topic'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from help" -f -a "list" -d 'The partitions whose last stable offset an open transaction holds back, the longest first'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand lso; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand audit" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand audit" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand audit" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand audit" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand audit" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand audit" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand audit" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand audit" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand audit" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -f -a "list" -d 'Users and their SCRAM mechanisms with iteration counts'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -f -a "add" -d 'Add a user, or change its password: the password is asked for on the terminal (twice, without echo) or read from stdin\'s first line with --password-stdin'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -f -a "delete" -d 'Delete a user\'s credentials (all mechanisms, or those named)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and not __fish_seen_subcommand_from list add delete help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from list" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from list" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from list" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from list" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from list" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from list" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from list" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from add" -l mechanism -d 'SCRAM-SHA-256 or SCRAM-SHA-512; repeat for both (the default). PLAIN logins are checked against these verifiers too' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from add" -l iterations -d 'PBKDF2 iterations (4096..=16384)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from add" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from add" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from add" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from add" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from add" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from add" -l password-stdin -d 'Read the password from the first line of stdin'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from add" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from add" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from add" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from delete" -l mechanism -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from delete" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from delete" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from delete" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from delete" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from delete" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from delete" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from delete" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from delete" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from delete" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from help" -f -a "list" -d 'Users and their SCRAM mechanisms with iteration counts'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from help" -f -a "add" -d 'Add a user, or change its password: the password is asked for on the terminal (twice, without echo) or read from stdin\'s first line with --password-stdin'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from help" -f -a "delete" -d 'Delete a user\'s credentials (all mechanisms, or those named)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand users; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -f -a "list" -d 'ACLs, all or those about one resource or principal'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -f -a "add" -d 'Add ACLs: each principal × host × operation on one resource, like kafka-acls --add (e.g. --allow-principal User:alice --operation write --topic orders)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -f -a "delete" -d 'Delete the ACLs the same flags as `add` describe'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and not __fish_seen_subcommand_from list add delete help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l topic -d 'A topic (\'*\' for every topic)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l group -d 'A consumer group (\'*\' for every group)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l transactional-id -d 'A transactional id (\'*\' for every id)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l resource-pattern-type -d 'How the resource name matches: any (ACLs with exactly this name), match (every ACL that applies to it: literal, \'*\' and prefixes), literal, prefixed' -r -f -a "any\t''
match\t''
literal\t''
prefixed\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l principal -d 'Only ACLs naming this principal (User:alice)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l cluster -d 'The cluster (kafka-cluster)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l topic -d 'A topic (\'*\' for every topic)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l group -d 'A consumer group (\'*\' for every group)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l transactional-id -d 'A transactional id (\'*\' for every id)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l allow-principal -d 'Principals allowed (User:alice, User:* for everyone); repeatable' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l deny-principal -d 'Principals denied; a DENY wins over any ALLOW. Repeatable' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l operation -d 'Operations: all, read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write. Repeatable' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l host -d 'Client addresses the ACL applies to (\'*\': any). Repeatable' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l cluster -d 'The cluster (kafka-cluster)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l prefixed -d 'The name is a prefix (PREFIXED), not a literal name'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l topic -d 'A topic (\'*\' for every topic)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l group -d 'A consumer group (\'*\' for every group)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l transactional-id -d 'A transactional id (\'*\' for every id)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l allow-principal -d 'Principals allowed (User:alice, User:* for everyone); repeatable' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l deny-principal -d 'Principals denied; a DENY wins over any ALLOW. Repeatable' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l operation -d 'Operations: all, read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write. Repeatable' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l host -d 'Client addresses the ACL applies to (\'*\': any). Repeatable' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l cluster -d 'The cluster (kafka-cluster)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l prefixed -d 'The name is a prefix (PREFIXED), not a literal name'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from delete" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from help" -f -a "list" -d 'ACLs, all or those about one resource or principal'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from help" -f -a "add" -d 'Add ACLs: each principal × host × operation on one resource, like kafka-acls --add (e.g. --allow-principal User:alice --operation write --topic orders)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from help" -f -a "delete" -d 'Delete the ACLs the same flags as `add` describe'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand acls; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -f -a "list" -d 'Quotas, all or those of the entities matching the names given (a component not given may be anything)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -f -a "set" -d 'Set quotas on an entity: KEY=VALUE with producer_byte_rate and consumer_byte_rate in bytes per second, request_percentage in percent of one thread'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -f -a "delete" -d 'Delete an entity\'s quotas: those named, or all'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and not __fish_seen_subcommand_from list set delete help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -l user -d 'The user (the principal\'s name: alice for User:alice)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -l client-id -d 'The client id' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -l default-user -d 'The default for users without a quota of their own'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -l default-client-id -d 'The default for client ids without a quota of their own'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -l user -d 'The user (the principal\'s name: alice for User:alice)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -l client-id -d 'The client id' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -l default-user -d 'The default for users without a quota of their own'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -l default-client-id -d 'The default for client ids without a quota of their own'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from set" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -l user -d 'The user (the principal\'s name: alice for User:alice)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -l client-id -d 'The client id' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -l default-user -d 'The default for users without a quota of their own'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -l default-client-id -d 'The default for client ids without a quota of their own'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from delete" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from help" -f -a "list" -d 'Quotas, all or those of the entities matching the names given (a component not given may be anything)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from help" -f -a "set" -d 'Set quotas on an entity: KEY=VALUE with producer_byte_rate and consumer_byte_rate in bytes per second, request_percentage in percent of one thread'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from help" -f -a "delete" -d 'Delete an entity\'s quotas: those named, or all'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand quotas; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand doctor" -l stuck-after -d 'A marker entry, Prepare* transaction or pinned LSO older than this is stuck' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand doctor" -l lso-pinned-after -d 'A last stable offset held back longer than this by a transaction still within its timeout is a warning (read_committed consumers wait behind it)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand doctor" -l min-free-percent -d 'Free space or inodes below this percentage is a problem (below twice it, a warning)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand doctor" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand doctor" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand doctor" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand doctor" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand doctor" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand doctor" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand doctor" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand doctor" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand metrics" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand metrics" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand metrics" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand metrics" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand metrics" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand metrics" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand metrics" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand metrics" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand metrics" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand top" -l interval -d 'Refresh period' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand top" -l view -d 'The view to start in' -r -f -a "overview\t''
transactions\t''
markers\t''
fences\t''
partitions\t''
groups\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand top" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand top" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand top" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand top" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand top" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand top" -l once -d 'Render one frame as plain text to stdout and exit (size from COLUMNS/LINES, default 120x40)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand top" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand top" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand top" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand top" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand completions" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand completions" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand completions" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand completions" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand completions" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand completions" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand completions" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand completions" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand completions" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand man" -l data-dir -d 'The shared volume (the brokers\' --data-dir)' -r -F
complete -c kaasctl -n "__fish_kaasctl_using_subcommand man" -s o -l output -d 'Output format: tables for people, JSON or YAML (the same fields) for scripts' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand man" -l columns -d 'Tables: only these columns (header names, comma-separated, any case), in the table\'s order; e.g. --columns \'transactional id,state\'' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand man" -l color -d 'When to colour tables (NO_COLOR in the environment means never)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kaasctl -n "__fish_kaasctl_using_subcommand man" -l session-timeout -d 'A broker whose lease is older than this is dead (the brokers\' --broker-session-timeout-ms)' -r
complete -c kaasctl -n "__fish_kaasctl_using_subcommand man" -l json -d 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand man" -l wide -d 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand man" -l allow-other-user -d 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume\'s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand man" -s h -l help -d 'Print help'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "brokers" -d 'Brokers with their lease age and liveness'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "topics" -d 'Topics: partitions, id, config overrides, and for compacted topics each partition\'s dirty ratio and last cleaning'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "compaction" -d 'The log cleaner per partition of compacted topics: dirty ratio, how far cleaning reached, what the last pass removed, failures'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "groups" -d 'Consumer groups: committed offsets and lag per partition (real lag, lag blocked behind an open transaction, control records no consumer will see)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "txn" -d 'Transactions'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "fence" -d 'Fence logs'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "markers" -d 'The marker queue'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "producers" -d 'Producer state of partitions'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "log" -d 'Partition logs'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "lso" -d 'Last stable offsets'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "audit" -d 'The audit journal of mutating kaasctl commands'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "users" -d 'SASL/SCRAM users brokers check logins against (salted verifiers only)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "acls" -d 'ACLs brokers enforce with --authorizer acls (Kafka\'s model: deny wins)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "quotas" -d 'Client quotas brokers enforce: produce and fetch byte rates and request-time percentages per user and client id (Kafka\'s model; docs/quotas.md)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "doctor" -d 'Check the volume and cluster from the outside: leases, clocks, slot files, disk space and inodes, stuck markers, hanging and overdue transactions, pinned LSOs. Prints a verdict and the next step for each finding; exit code 3 on a problem'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "metrics" -d 'Transaction facts in Prometheus text format (for a textfile collector)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "top" -d 'The live dashboard: transactions, markers, fences, partitions, groups'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "completions" -d 'Shell completions for kaasctl'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "man" -d 'The kaasctl man page (roff) on stdout'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and not __fish_seen_subcommand_from brokers topics compaction groups txn fence markers producers log lso audit users acls quotas doctor metrics top completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from txn" -f -a "list" -d 'Every transaction on the volume (kafka-transactions.sh list / rpk cluster txn list)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from txn" -f -a "show" -d 'Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers (also `describe`, kafka-transactions.sh\'s name)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from txn" -f -a "abort" -d 'Force-abort an open transaction: PrepareAbort at epoch + 1, ABORT markers, staged offsets discarded, CompleteAbort'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from txn" -f -a "repair" -d 'Check the whole volume; with --fix, repair what is inconsistent'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from txn" -f -a "find-hanging" -d 'Exact hanging-transaction detection: partitions\' open transactions joined with the coordinator\'s slots'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from txn" -f -a "timeline" -d 'The recorded transition history of one transaction, with its fences and queued markers'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from fence" -f -a "show" -d 'Per writer (broker or admin): producer id, fenced epoch, when recorded'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from markers" -f -a "list" -d 'Queue depth and oldest entry age per target broker'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from markers" -f -a "show" -d 'Each queued entry: transaction, result, partitions'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from producers" -f -a "show" -d 'The partition\'s producer-state snapshot plus the log tail replayed after it'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from log" -f -a "dump" -d 'Batches of a partition log: offsets, producer id/epoch/sequence, flags, control type'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from lso" -f -a "explain" -d 'Which producer and transaction pin a partition\'s last stable offset, and what to do; without PARTITION, every partition of the topic'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from lso" -f -a "list" -d 'The partitions whose last stable offset an open transaction holds back, the longest first'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from users" -f -a "list" -d 'Users and their SCRAM mechanisms with iteration counts'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from users" -f -a "add" -d 'Add a user, or change its password: the password is asked for on the terminal (twice, without echo) or read from stdin\'s first line with --password-stdin'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from users" -f -a "delete" -d 'Delete a user\'s credentials (all mechanisms, or those named)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from acls" -f -a "list" -d 'ACLs, all or those about one resource or principal'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from acls" -f -a "add" -d 'Add ACLs: each principal × host × operation on one resource, like kafka-acls --add (e.g. --allow-principal User:alice --operation write --topic orders)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from acls" -f -a "delete" -d 'Delete the ACLs the same flags as `add` describe'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from quotas" -f -a "list" -d 'Quotas, all or those of the entities matching the names given (a component not given may be anything)'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from quotas" -f -a "set" -d 'Set quotas on an entity: KEY=VALUE with producer_byte_rate and consumer_byte_rate in bytes per second, request_percentage in percent of one thread'
complete -c kaasctl -n "__fish_kaasctl_using_subcommand help; and __fish_seen_subcommand_from quotas" -f -a "delete" -d 'Delete an entity\'s quotas: those named, or all'
