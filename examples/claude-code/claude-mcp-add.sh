#!/bin/sh
# Register server-filesystem with Claude Code, wrapped by rootfs. Claude Code
# answers roots/list with its working directories and sends list_changed on
# /add-dir, so the server sees exactly those folders and nothing else. A
# variable of the env block (-e) reaches the server only through --setenv NAME.
claude mcp add --scope project -e NODE_OPTIONS=--max-old-space-size=512 filesystem -- rootfs run --setenv NODE_OPTIONS -- mcp-server-filesystem
