// Package machinemigration is the MachineMigration controller: it moves a persistent claim's VM
// to another host (the one named, or the best one pkg/placement finds with the claim's placement
// rules, memory and PCI devices, never a host in maintenance), follows the hypervisor's task, and
// tells the claim its VM's new host; deleting the object cancels a migration under way where the
// hypervisor can.
package machinemigration
