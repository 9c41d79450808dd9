//go:build linux

package main

func int80(nr, a1 uintptr) uintptr

const haveInt80 = true
