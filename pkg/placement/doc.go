// Package placement chooses where a new VM goes: the node with the most free memory among the
// allowed ones (after memory already promised to VMs still being created) — for a linked clone,
// among the nodes holding a copy of its template — and a VMID candidate spread over the
// configured range so concurrent claims rarely propose the same ID.
package placement
