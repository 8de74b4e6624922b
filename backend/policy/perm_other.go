//go:build !unix

package policy

import "io/fs"

// permissionProblems has no portable meaning outside Unix; ACLs are left to the owner.
func permissionProblems(string, fs.FileInfo) []Problem { return nil }
