
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'kaasctl' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'kaasctl'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'kaasctl' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('brokers', 'brokers', [CompletionResultType]::ParameterValue, 'Brokers with their lease age and liveness')
            [CompletionResult]::new('topics', 'topics', [CompletionResultType]::ParameterValue, 'Topics: partitions, id, config overrides, and for compacted topics each partition''s dirty ratio and last cleaning')
            [CompletionResult]::new('compaction', 'compaction', [CompletionResultType]::ParameterValue, 'The log cleaner per partition of compacted topics: dirty ratio, how far cleaning reached, what the last pass removed, failures')
            [CompletionResult]::new('groups', 'groups', [CompletionResultType]::ParameterValue, 'Consumer groups: committed offsets and lag per partition (real lag, lag blocked behind an open transaction, control records no consumer will see)')
            [CompletionResult]::new('txn', 'txn', [CompletionResultType]::ParameterValue, 'Transactions')
            [CompletionResult]::new('fence', 'fence', [CompletionResultType]::ParameterValue, 'Fence logs')
            [CompletionResult]::new('markers', 'markers', [CompletionResultType]::ParameterValue, 'The marker queue')
            [CompletionResult]::new('producers', 'producers', [CompletionResultType]::ParameterValue, 'Producer state of partitions')
            [CompletionResult]::new('log', 'log', [CompletionResultType]::ParameterValue, 'Partition logs')
            [CompletionResult]::new('lso', 'lso', [CompletionResultType]::ParameterValue, 'Last stable offsets')
            [CompletionResult]::new('audit', 'audit', [CompletionResultType]::ParameterValue, 'The audit journal of mutating kaasctl commands')
            [CompletionResult]::new('users', 'users', [CompletionResultType]::ParameterValue, 'SASL/SCRAM users brokers check logins against (salted verifiers only)')
            [CompletionResult]::new('acls', 'acls', [CompletionResultType]::ParameterValue, 'ACLs brokers enforce with --authorizer acls (Kafka''s model: deny wins)')
            [CompletionResult]::new('quotas', 'quotas', [CompletionResultType]::ParameterValue, 'Client quotas brokers enforce: produce and fetch byte rates and request-time percentages per user and client id (Kafka''s model; docs/quotas.md)')
            [CompletionResult]::new('doctor', 'doctor', [CompletionResultType]::ParameterValue, 'Check the volume and cluster from the outside: leases, clocks, slot files, disk space and inodes, stuck markers, hanging and overdue transactions, pinned LSOs. Prints a verdict and the next step for each finding; exit code 3 on a problem')
            [CompletionResult]::new('metrics', 'metrics', [CompletionResultType]::ParameterValue, 'Transaction facts in Prometheus text format (for a textfile collector)')
            [CompletionResult]::new('top', 'top', [CompletionResultType]::ParameterValue, 'The live dashboard: transactions, markers, fences, partitions, groups')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Shell completions for kaasctl')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'The kaasctl man page (roff) on stdout')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;brokers' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;topics' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;compaction' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;groups' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;txn' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Every transaction on the volume (kafka-transactions.sh list / rpk cluster txn list)')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers (also `describe`, kafka-transactions.sh''s name)')
            [CompletionResult]::new('describe', 'describe', [CompletionResultType]::ParameterValue, 'Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers (also `describe`, kafka-transactions.sh''s name)')
            [CompletionResult]::new('abort', 'abort', [CompletionResultType]::ParameterValue, 'Force-abort an open transaction: PrepareAbort at epoch + 1, ABORT markers, staged offsets discarded, CompleteAbort')
            [CompletionResult]::new('repair', 'repair', [CompletionResultType]::ParameterValue, 'Check the whole volume; with --fix, repair what is inconsistent')
            [CompletionResult]::new('find-hanging', 'find-hanging', [CompletionResultType]::ParameterValue, 'Exact hanging-transaction detection: partitions'' open transactions joined with the coordinator''s slots')
            [CompletionResult]::new('timeline', 'timeline', [CompletionResultType]::ParameterValue, 'The recorded transition history of one transaction, with its fences and queued markers')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;txn;list' {
            [CompletionResult]::new('--state', '--state', [CompletionResultType]::ParameterName, 'Only these states (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort); repeatable')
            [CompletionResult]::new('--slot', '--slot', [CompletionResultType]::ParameterName, 'Only this slot (0..49)')
            [CompletionResult]::new('--owner', '--owner', [CompletionResultType]::ParameterName, 'Only transactions coordinated by this broker')
            [CompletionResult]::new('--older-than', '--older-than', [CompletionResultType]::ParameterName, 'Only open transactions older than this (e.g. 5m, 1h30m)')
            [CompletionResult]::new('--transactional-id', '--transactional-id', [CompletionResultType]::ParameterName, 'Only transactional ids matching this glob (e.g. ''orders-*'')')
            [CompletionResult]::new('--sort', '--sort', [CompletionResultType]::ParameterName, 'Sort order')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;txn;show' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;txn;describe' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;txn;abort' {
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'How long to wait for brokers to write queued markers before leaving completion to them')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Show the plan and change nothing')
            [CompletionResult]::new('-y', '-y', [CompletionResultType]::ParameterName, 'Do not ask for confirmation')
            [CompletionResult]::new('--yes', '--yes', [CompletionResultType]::ParameterName, 'Do not ask for confirmation')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;txn;repair' {
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'How long to wait for brokers to write queued markers of a finished transaction')
            [CompletionResult]::new('--stuck-after', '--stuck-after', [CompletionResultType]::ParameterName, 'A Prepare* transaction younger than this is left to its coordinator while any broker is live (its reaper finishes one within seconds)')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--fix', '--fix', [CompletionResultType]::ParameterName, 'Repair what was found (asks first unless --yes)')
            [CompletionResult]::new('-y', '-y', [CompletionResultType]::ParameterName, 'Do not ask for confirmation')
            [CompletionResult]::new('--yes', '--yes', [CompletionResultType]::ParameterName, 'Do not ask for confirmation')
            [CompletionResult]::new('--accept-slot-loss', '--accept-slot-loss', [CompletionResultType]::ParameterName, 'Rescue an unreadable slot even when that loses something in flight (its checkpoint does not parse, or a dropped journal line may have moved on a transaction that is Ongoing or Prepare*); refused otherwise')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;txn;find-hanging' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;txn;timeline' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;txn;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Every transaction on the volume (kafka-transactions.sh list / rpk cluster txn list)')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers (also `describe`, kafka-transactions.sh''s name)')
            [CompletionResult]::new('abort', 'abort', [CompletionResultType]::ParameterValue, 'Force-abort an open transaction: PrepareAbort at epoch + 1, ABORT markers, staged offsets discarded, CompleteAbort')
            [CompletionResult]::new('repair', 'repair', [CompletionResultType]::ParameterValue, 'Check the whole volume; with --fix, repair what is inconsistent')
            [CompletionResult]::new('find-hanging', 'find-hanging', [CompletionResultType]::ParameterValue, 'Exact hanging-transaction detection: partitions'' open transactions joined with the coordinator''s slots')
            [CompletionResult]::new('timeline', 'timeline', [CompletionResultType]::ParameterValue, 'The recorded transition history of one transaction, with its fences and queued markers')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;txn;help;list' {
            break
        }
        'kaasctl;txn;help;show' {
            break
        }
        'kaasctl;txn;help;abort' {
            break
        }
        'kaasctl;txn;help;repair' {
            break
        }
        'kaasctl;txn;help;find-hanging' {
            break
        }
        'kaasctl;txn;help;timeline' {
            break
        }
        'kaasctl;txn;help;help' {
            break
        }
        'kaasctl;fence' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Per writer (broker or admin): producer id, fenced epoch, when recorded')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;fence;show' {
            [CompletionResult]::new('--pid', '--pid', [CompletionResultType]::ParameterName, 'Only this producer id')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;fence;help' {
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Per writer (broker or admin): producer id, fenced epoch, when recorded')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;fence;help;show' {
            break
        }
        'kaasctl;fence;help;help' {
            break
        }
        'kaasctl;markers' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Queue depth and oldest entry age per target broker')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Each queued entry: transaction, result, partitions')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;markers;list' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;markers;show' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;markers;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Queue depth and oldest entry age per target broker')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Each queued entry: transaction, result, partitions')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;markers;help;list' {
            break
        }
        'kaasctl;markers;help;show' {
            break
        }
        'kaasctl;markers;help;help' {
            break
        }
        'kaasctl;producers' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'The partition''s producer-state snapshot plus the log tail replayed after it')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;producers;show' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;producers;help' {
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'The partition''s producer-state snapshot plus the log tail replayed after it')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;producers;help;show' {
            break
        }
        'kaasctl;producers;help;help' {
            break
        }
        'kaasctl;log' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('dump', 'dump', [CompletionResultType]::ParameterValue, 'Batches of a partition log: offsets, producer id/epoch/sequence, flags, control type')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;log;dump' {
            [CompletionResult]::new('--from', '--from', [CompletionResultType]::ParameterName, 'First offset to show')
            [CompletionResult]::new('--count', '--count', [CompletionResultType]::ParameterName, 'At most this many batches')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--records', '--records', [CompletionResultType]::ParameterName, 'Also print each record''s key and value (uncompressed batches)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;log;help' {
            [CompletionResult]::new('dump', 'dump', [CompletionResultType]::ParameterValue, 'Batches of a partition log: offsets, producer id/epoch/sequence, flags, control type')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;log;help;dump' {
            break
        }
        'kaasctl;log;help;help' {
            break
        }
        'kaasctl;lso' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('explain', 'explain', [CompletionResultType]::ParameterValue, 'Which producer and transaction pin a partition''s last stable offset, and what to do; without PARTITION, every partition of the topic')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'The partitions whose last stable offset an open transaction holds back, the longest first')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;lso;explain' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;lso;list' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;lso;help' {
            [CompletionResult]::new('explain', 'explain', [CompletionResultType]::ParameterValue, 'Which producer and transaction pin a partition''s last stable offset, and what to do; without PARTITION, every partition of the topic')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'The partitions whose last stable offset an open transaction holds back, the longest first')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;lso;help;explain' {
            break
        }
        'kaasctl;lso;help;list' {
            break
        }
        'kaasctl;lso;help;help' {
            break
        }
        'kaasctl;audit' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;users' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Users and their SCRAM mechanisms with iteration counts')
            [CompletionResult]::new('add', 'add', [CompletionResultType]::ParameterValue, 'Add a user, or change its password: the password is asked for on the terminal (twice, without echo) or read from stdin''s first line with --password-stdin')
            [CompletionResult]::new('delete', 'delete', [CompletionResultType]::ParameterValue, 'Delete a user''s credentials (all mechanisms, or those named)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;users;list' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;users;add' {
            [CompletionResult]::new('--mechanism', '--mechanism', [CompletionResultType]::ParameterName, 'SCRAM-SHA-256 or SCRAM-SHA-512; repeat for both (the default). PLAIN logins are checked against these verifiers too')
            [CompletionResult]::new('--iterations', '--iterations', [CompletionResultType]::ParameterName, 'PBKDF2 iterations (4096..=16384)')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--password-stdin', '--password-stdin', [CompletionResultType]::ParameterName, 'Read the password from the first line of stdin')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;users;delete' {
            [CompletionResult]::new('--mechanism', '--mechanism', [CompletionResultType]::ParameterName, 'mechanism')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;users;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Users and their SCRAM mechanisms with iteration counts')
            [CompletionResult]::new('add', 'add', [CompletionResultType]::ParameterValue, 'Add a user, or change its password: the password is asked for on the terminal (twice, without echo) or read from stdin''s first line with --password-stdin')
            [CompletionResult]::new('delete', 'delete', [CompletionResultType]::ParameterValue, 'Delete a user''s credentials (all mechanisms, or those named)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;users;help;list' {
            break
        }
        'kaasctl;users;help;add' {
            break
        }
        'kaasctl;users;help;delete' {
            break
        }
        'kaasctl;users;help;help' {
            break
        }
        'kaasctl;acls' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'ACLs, all or those about one resource or principal')
            [CompletionResult]::new('add', 'add', [CompletionResultType]::ParameterValue, 'Add ACLs: each principal × host × operation on one resource, like kafka-acls --add (e.g. --allow-principal User:alice --operation write --topic orders)')
            [CompletionResult]::new('delete', 'delete', [CompletionResultType]::ParameterValue, 'Delete the ACLs the same flags as `add` describe')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;acls;list' {
            [CompletionResult]::new('--topic', '--topic', [CompletionResultType]::ParameterName, 'A topic (''*'' for every topic)')
            [CompletionResult]::new('--group', '--group', [CompletionResultType]::ParameterName, 'A consumer group (''*'' for every group)')
            [CompletionResult]::new('--transactional-id', '--transactional-id', [CompletionResultType]::ParameterName, 'A transactional id (''*'' for every id)')
            [CompletionResult]::new('--resource-pattern-type', '--resource-pattern-type', [CompletionResultType]::ParameterName, 'How the resource name matches: any (ACLs with exactly this name), match (every ACL that applies to it: literal, ''*'' and prefixes), literal, prefixed')
            [CompletionResult]::new('--principal', '--principal', [CompletionResultType]::ParameterName, 'Only ACLs naming this principal (User:alice)')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--cluster', '--cluster', [CompletionResultType]::ParameterName, 'The cluster (kafka-cluster)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;acls;add' {
            [CompletionResult]::new('--topic', '--topic', [CompletionResultType]::ParameterName, 'A topic (''*'' for every topic)')
            [CompletionResult]::new('--group', '--group', [CompletionResultType]::ParameterName, 'A consumer group (''*'' for every group)')
            [CompletionResult]::new('--transactional-id', '--transactional-id', [CompletionResultType]::ParameterName, 'A transactional id (''*'' for every id)')
            [CompletionResult]::new('--allow-principal', '--allow-principal', [CompletionResultType]::ParameterName, 'Principals allowed (User:alice, User:* for everyone); repeatable')
            [CompletionResult]::new('--deny-principal', '--deny-principal', [CompletionResultType]::ParameterName, 'Principals denied; a DENY wins over any ALLOW. Repeatable')
            [CompletionResult]::new('--operation', '--operation', [CompletionResultType]::ParameterName, 'Operations: all, read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write. Repeatable')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'Client addresses the ACL applies to (''*'': any). Repeatable')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--cluster', '--cluster', [CompletionResultType]::ParameterName, 'The cluster (kafka-cluster)')
            [CompletionResult]::new('--prefixed', '--prefixed', [CompletionResultType]::ParameterName, 'The name is a prefix (PREFIXED), not a literal name')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;acls;delete' {
            [CompletionResult]::new('--topic', '--topic', [CompletionResultType]::ParameterName, 'A topic (''*'' for every topic)')
            [CompletionResult]::new('--group', '--group', [CompletionResultType]::ParameterName, 'A consumer group (''*'' for every group)')
            [CompletionResult]::new('--transactional-id', '--transactional-id', [CompletionResultType]::ParameterName, 'A transactional id (''*'' for every id)')
            [CompletionResult]::new('--allow-principal', '--allow-principal', [CompletionResultType]::ParameterName, 'Principals allowed (User:alice, User:* for everyone); repeatable')
            [CompletionResult]::new('--deny-principal', '--deny-principal', [CompletionResultType]::ParameterName, 'Principals denied; a DENY wins over any ALLOW. Repeatable')
            [CompletionResult]::new('--operation', '--operation', [CompletionResultType]::ParameterName, 'Operations: all, read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write. Repeatable')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'Client addresses the ACL applies to (''*'': any). Repeatable')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--cluster', '--cluster', [CompletionResultType]::ParameterName, 'The cluster (kafka-cluster)')
            [CompletionResult]::new('--prefixed', '--prefixed', [CompletionResultType]::ParameterName, 'The name is a prefix (PREFIXED), not a literal name')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;acls;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'ACLs, all or those about one resource or principal')
            [CompletionResult]::new('add', 'add', [CompletionResultType]::ParameterValue, 'Add ACLs: each principal × host × operation on one resource, like kafka-acls --add (e.g. --allow-principal User:alice --operation write --topic orders)')
            [CompletionResult]::new('delete', 'delete', [CompletionResultType]::ParameterValue, 'Delete the ACLs the same flags as `add` describe')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;acls;help;list' {
            break
        }
        'kaasctl;acls;help;add' {
            break
        }
        'kaasctl;acls;help;delete' {
            break
        }
        'kaasctl;acls;help;help' {
            break
        }
        'kaasctl;quotas' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Quotas, all or those of the entities matching the names given (a component not given may be anything)')
            [CompletionResult]::new('set', 'set', [CompletionResultType]::ParameterValue, 'Set quotas on an entity: KEY=VALUE with producer_byte_rate and consumer_byte_rate in bytes per second, request_percentage in percent of one thread')
            [CompletionResult]::new('delete', 'delete', [CompletionResultType]::ParameterValue, 'Delete an entity''s quotas: those named, or all')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;quotas;list' {
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'The user (the principal''s name: alice for User:alice)')
            [CompletionResult]::new('--client-id', '--client-id', [CompletionResultType]::ParameterName, 'The client id')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--default-user', '--default-user', [CompletionResultType]::ParameterName, 'The default for users without a quota of their own')
            [CompletionResult]::new('--default-client-id', '--default-client-id', [CompletionResultType]::ParameterName, 'The default for client ids without a quota of their own')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;quotas;set' {
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'The user (the principal''s name: alice for User:alice)')
            [CompletionResult]::new('--client-id', '--client-id', [CompletionResultType]::ParameterName, 'The client id')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--default-user', '--default-user', [CompletionResultType]::ParameterName, 'The default for users without a quota of their own')
            [CompletionResult]::new('--default-client-id', '--default-client-id', [CompletionResultType]::ParameterName, 'The default for client ids without a quota of their own')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;quotas;delete' {
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'The user (the principal''s name: alice for User:alice)')
            [CompletionResult]::new('--client-id', '--client-id', [CompletionResultType]::ParameterName, 'The client id')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--default-user', '--default-user', [CompletionResultType]::ParameterName, 'The default for users without a quota of their own')
            [CompletionResult]::new('--default-client-id', '--default-client-id', [CompletionResultType]::ParameterName, 'The default for client ids without a quota of their own')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;quotas;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Quotas, all or those of the entities matching the names given (a component not given may be anything)')
            [CompletionResult]::new('set', 'set', [CompletionResultType]::ParameterValue, 'Set quotas on an entity: KEY=VALUE with producer_byte_rate and consumer_byte_rate in bytes per second, request_percentage in percent of one thread')
            [CompletionResult]::new('delete', 'delete', [CompletionResultType]::ParameterValue, 'Delete an entity''s quotas: those named, or all')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;quotas;help;list' {
            break
        }
        'kaasctl;quotas;help;set' {
            break
        }
        'kaasctl;quotas;help;delete' {
            break
        }
        'kaasctl;quotas;help;help' {
            break
        }
        'kaasctl;doctor' {
            [CompletionResult]::new('--stuck-after', '--stuck-after', [CompletionResultType]::ParameterName, 'A marker entry, Prepare* transaction or pinned LSO older than this is stuck')
            [CompletionResult]::new('--lso-pinned-after', '--lso-pinned-after', [CompletionResultType]::ParameterName, 'A last stable offset held back longer than this by a transaction still within its timeout is a warning (read_committed consumers wait behind it)')
            [CompletionResult]::new('--min-free-percent', '--min-free-percent', [CompletionResultType]::ParameterName, 'Free space or inodes below this percentage is a problem (below twice it, a warning)')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;metrics' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;top' {
            [CompletionResult]::new('--interval', '--interval', [CompletionResultType]::ParameterName, 'Refresh period')
            [CompletionResult]::new('--view', '--view', [CompletionResultType]::ParameterName, 'The view to start in')
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--once', '--once', [CompletionResultType]::ParameterName, 'Render one frame as plain text to stdout and exit (size from COLUMNS/LINES, default 120x40)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;completions' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;man' {
            [CompletionResult]::new('--data-dir', '--data-dir', [CompletionResultType]::ParameterName, 'The shared volume (the brokers'' --data-dir)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: tables for people, JSON or YAML (the same fields) for scripts')
            [CompletionResult]::new('--columns', '--columns', [CompletionResultType]::ParameterName, 'Tables: only these columns (header names, comma-separated, any case), in the table''s order; e.g. --columns ''transactional id,state''')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour tables (NO_COLOR in the environment means never)')
            [CompletionResult]::new('--session-timeout', '--session-timeout', [CompletionResultType]::ParameterName, 'A broker whose lease is older than this is dead (the brokers'' --broker-session-timeout-ms)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same as --output json')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Tables: whole rows on one line even on a terminal, and the extra columns some commands keep for this (like kubectl -o wide)')
            [CompletionResult]::new('--allow-other-user', '--allow-other-user', [CompletionResultType]::ParameterName, 'Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts from top) run as a user other than the volume''s owner. The files they write then belong to that user, and brokers running as the owner may be unable to read them')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'kaasctl;help' {
            [CompletionResult]::new('brokers', 'brokers', [CompletionResultType]::ParameterValue, 'Brokers with their lease age and liveness')
            [CompletionResult]::new('topics', 'topics', [CompletionResultType]::ParameterValue, 'Topics: partitions, id, config overrides, and for compacted topics each partition''s dirty ratio and last cleaning')
            [CompletionResult]::new('compaction', 'compaction', [CompletionResultType]::ParameterValue, 'The log cleaner per partition of compacted topics: dirty ratio, how far cleaning reached, what the last pass removed, failures')
            [CompletionResult]::new('groups', 'groups', [CompletionResultType]::ParameterValue, 'Consumer groups: committed offsets and lag per partition (real lag, lag blocked behind an open transaction, control records no consumer will see)')
            [CompletionResult]::new('txn', 'txn', [CompletionResultType]::ParameterValue, 'Transactions')
            [CompletionResult]::new('fence', 'fence', [CompletionResultType]::ParameterValue, 'Fence logs')
            [CompletionResult]::new('markers', 'markers', [CompletionResultType]::ParameterValue, 'The marker queue')
            [CompletionResult]::new('producers', 'producers', [CompletionResultType]::ParameterValue, 'Producer state of partitions')
            [CompletionResult]::new('log', 'log', [CompletionResultType]::ParameterValue, 'Partition logs')
            [CompletionResult]::new('lso', 'lso', [CompletionResultType]::ParameterValue, 'Last stable offsets')
            [CompletionResult]::new('audit', 'audit', [CompletionResultType]::ParameterValue, 'The audit journal of mutating kaasctl commands')
            [CompletionResult]::new('users', 'users', [CompletionResultType]::ParameterValue, 'SASL/SCRAM users brokers check logins against (salted verifiers only)')
            [CompletionResult]::new('acls', 'acls', [CompletionResultType]::ParameterValue, 'ACLs brokers enforce with --authorizer acls (Kafka''s model: deny wins)')
            [CompletionResult]::new('quotas', 'quotas', [CompletionResultType]::ParameterValue, 'Client quotas brokers enforce: produce and fetch byte rates and request-time percentages per user and client id (Kafka''s model; docs/quotas.md)')
            [CompletionResult]::new('doctor', 'doctor', [CompletionResultType]::ParameterValue, 'Check the volume and cluster from the outside: leases, clocks, slot files, disk space and inodes, stuck markers, hanging and overdue transactions, pinned LSOs. Prints a verdict and the next step for each finding; exit code 3 on a problem')
            [CompletionResult]::new('metrics', 'metrics', [CompletionResultType]::ParameterValue, 'Transaction facts in Prometheus text format (for a textfile collector)')
            [CompletionResult]::new('top', 'top', [CompletionResultType]::ParameterValue, 'The live dashboard: transactions, markers, fences, partitions, groups')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Shell completions for kaasctl')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'The kaasctl man page (roff) on stdout')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'kaasctl;help;brokers' {
            break
        }
        'kaasctl;help;topics' {
            break
        }
        'kaasctl;help;compaction' {
            break
        }
        'kaasctl;help;groups' {
            break
        }
        'kaasctl;help;txn' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Every transaction on the volume (kafka-transactions.sh list / rpk cluster txn list)')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers (also `describe`, kafka-transactions.sh''s name)')
            [CompletionResult]::new('abort', 'abort', [CompletionResultType]::ParameterValue, 'Force-abort an open transaction: PrepareAbort at epoch + 1, ABORT markers, staged offsets discarded, CompleteAbort')
            [CompletionResult]::new('repair', 'repair', [CompletionResultType]::ParameterValue, 'Check the whole volume; with --fix, repair what is inconsistent')
            [CompletionResult]::new('find-hanging', 'find-hanging', [CompletionResultType]::ParameterValue, 'Exact hanging-transaction detection: partitions'' open transactions joined with the coordinator''s slots')
            [CompletionResult]::new('timeline', 'timeline', [CompletionResultType]::ParameterValue, 'The recorded transition history of one transaction, with its fences and queued markers')
            break
        }
        'kaasctl;help;txn;list' {
            break
        }
        'kaasctl;help;txn;show' {
            break
        }
        'kaasctl;help;txn;abort' {
            break
        }
        'kaasctl;help;txn;repair' {
            break
        }
        'kaasctl;help;txn;find-hanging' {
            break
        }
        'kaasctl;help;txn;timeline' {
            break
        }
        'kaasctl;help;fence' {
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Per writer (broker or admin): producer id, fenced epoch, when recorded')
            break
        }
        'kaasctl;help;fence;show' {
            break
        }
        'kaasctl;help;markers' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Queue depth and oldest entry age per target broker')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Each queued entry: transaction, result, partitions')
            break
        }
        'kaasctl;help;markers;list' {
            break
        }
        'kaasctl;help;markers;show' {
            break
        }
        'kaasctl;help;producers' {
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'The partition''s producer-state snapshot plus the log tail replayed after it')
            break
        }
        'kaasctl;help;producers;show' {
            break
        }
        'kaasctl;help;log' {
            [CompletionResult]::new('dump', 'dump', [CompletionResultType]::ParameterValue, 'Batches of a partition log: offsets, producer id/epoch/sequence, flags, control type')
            break
        }
        'kaasctl;help;log;dump' {
            break
        }
        'kaasctl;help;lso' {
            [CompletionResult]::new('explain', 'explain', [CompletionResultType]::ParameterValue, 'Which producer and transaction pin a partition''s last stable offset, and what to do; without PARTITION, every partition of the topic')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'The partitions whose last stable offset an open transaction holds back, the longest first')
            break
        }
        'kaasctl;help;lso;explain' {
            break
        }
        'kaasctl;help;lso;list' {
            break
        }
        'kaasctl;help;audit' {
            break
        }
        'kaasctl;help;users' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Users and their SCRAM mechanisms with iteration counts')
            [CompletionResult]::new('add', 'add', [CompletionResultType]::ParameterValue, 'Add a user, or change its password: the password is asked for on the terminal (twice, without echo) or read from stdin''s first line with --password-stdin')
            [CompletionResult]::new('delete', 'delete', [CompletionResultType]::ParameterValue, 'Delete a user''s credentials (all mechanisms, or those named)')
            break
        }
        'kaasctl;help;users;list' {
            break
        }
        'kaasctl;help;users;add' {
            break
        }
        'kaasctl;help;users;delete' {
            break
        }
        'kaasctl;help;acls' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'ACLs, all or those about one resource or principal')
            [CompletionResult]::new('add', 'add', [CompletionResultType]::ParameterValue, 'Add ACLs: each principal × host × operation on one resource, like kafka-acls --add (e.g. --allow-principal User:alice --operation write --topic orders)')
            [CompletionResult]::new('delete', 'delete', [CompletionResultType]::ParameterValue, 'Delete the ACLs the same flags as `add` describe')
            break
        }
        'kaasctl;help;acls;list' {
            break
        }
        'kaasctl;help;acls;add' {
            break
        }
        'kaasctl;help;acls;delete' {
            break
        }
        'kaasctl;help;quotas' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Quotas, all or those of the entities matching the names given (a component not given may be anything)')
            [CompletionResult]::new('set', 'set', [CompletionResultType]::ParameterValue, 'Set quotas on an entity: KEY=VALUE with producer_byte_rate and consumer_byte_rate in bytes per second, request_percentage in percent of one thread')
            [CompletionResult]::new('delete', 'delete', [CompletionResultType]::ParameterValue, 'Delete an entity''s quotas: those named, or all')
            break
        }
        'kaasctl;help;quotas;list' {
            break
        }
        'kaasctl;help;quotas;set' {
            break
        }
        'kaasctl;help;quotas;delete' {
            break
        }
        'kaasctl;help;doctor' {
            break
        }
        'kaasctl;help;metrics' {
            break
        }
        'kaasctl;help;top' {
            break
        }
        'kaasctl;help;completions' {
            break
        }
        'kaasctl;help;man' {
            break
        }
        'kaasctl;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
