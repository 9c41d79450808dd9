#!/bin/sh
# Register server-filesystem with Claude Code, wrapped by rootfs. Claude Code
# answers roots/list with its working directories and sends list_changed on
# /add-dir, so the server sees exactly those folders and nothing else.
claude mcp add --scope project filesystem -- rootfs run -- mcp-server-filesystem
