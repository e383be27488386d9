# bash completion for vestibule-mcp(1). Installed as
# /usr/share/bash-completion/completions/vestibule-mcp (loaded on demand by bash-completion).

_vestibule_mcp()
{
    local cur prev words cword
    _init_completion || return

    local commands="run setup install-client doctor verify audit version help"
    local settings="VESTIBULE_WORKSPACE= VESTIBULE_WORKSPACE_RO= VESTIBULE_BACKEND=
        VESTIBULE_RUNTIME= VESTIBULE_IMAGE_PYTHON= VESTIBULE_IMAGE_NODE= VESTIBULE_IMAGE_SOURCE=
        VESTIBULE_ROOTFS_DIR= VESTIBULE_AUDIT_DIR= VESTIBULE_DEFAULT_TIMEOUT_S=
        VESTIBULE_MAX_TIMEOUT_S= VESTIBULE_MAX_CODE_BYTES= VESTIBULE_MAX_OUTPUT_BYTES=
        VESTIBULE_MEM_MB= VESTIBULE_CPU_PCT= VESTIBULE_PIDS_MAX= VESTIBULE_TMPFS_MB=
        VESTIBULE_MAX_CONCURRENT= VESTIBULE_RUN_AS= VESTIBULE_CONFIG= VESTIBULE_LOG_LEVEL=
        VESTIBULE_TRACE= PATH= DOCKER_HOST= DOCKER_CONTEXT= DOCKER_TLS_VERIFY= DOCKER_CERT_PATH=
        CONTAINER_HOST="

    if [[ $cword -eq 1 ]]; then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return
    fi

    case ${words[1]} in
    run)
        case $prev in
        -l | --language)
            COMPREPLY=($(compgen -W "python node bash" -- "$cur"))
            return ;;
        -c | --code | -t | --timeout)
            return ;;
        esac
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--language --code --timeout --json --help" -- "$cur"))
        else
            _filedir
        fi ;;
    setup)
        case $prev in
        --language)
            COMPREPLY=($(compgen -W "python node" -- "$cur"))
            return ;;
        --from-tar)
            _filedir tar
            return ;;
        --rootfs-dir | --save-tars)
            _filedir -d
            return ;;
        esac
        COMPREPLY=($(compgen -W "--from-debian --from-tar --language --rootfs-dir --save-tars
            --force --apparmor --help" -- "$cur")) ;;
    install-client)
        case $prev in
        --env)
            compopt -o nospace
            COMPREPLY=($(compgen -W "$settings" -- "$cur"))
            return ;;
        --config)
            _filedir
            return ;;
        --name)
            return ;;
        esac
        if [[ $cword -eq 2 && $cur != -* ]]; then
            COMPREPLY=($(compgen -W "claude-code claude-desktop cursor vscode codex gemini
                opencode" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "--print --env --config --name --help" -- "$cur"))
        fi ;;
    doctor)
        COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
    verify)
        COMPREPLY=($(compgen -W "--all --json --help" -- "$cur")) ;;
    audit)
        COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
    version)
        COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
    esac
} &&
    complete -F _vestibule_mcp vestibule-mcp
