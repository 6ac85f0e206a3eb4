# HyperFleet's Hyper-V operations, one exported function per operation.
#
# Every function takes one argument, -InputBase64: a JSON object encoded as UTF-8 and base64,
# because the WinRM command line is capped at 8191 characters and a base64 string needs no quoting.
# Every function writes exactly one line of JSON to the output stream:
#   {"Ok":true,"Data":{...}}                               on success
#   {"Ok":false,"Class":"NotOwned","Message":"..."}        on a refusal or a failed cmdlet
# Written for Windows PowerShell 5.1 (JavaScriptSerializer): arrays are forced with @() and
# serialised with ConvertTo-Json -InputObject so one-element arrays stay arrays, enums are cast to
# [int], dates are written as ISO 8601 strings and GUIDs with .ToString().
#
# Ownership is re-checked here, on the host, before any change: a VM whose Notes do not carry the
# caller's installation and owner in a ```hyperfleet block is refused with class NotOwned, and a
# template is never changed, whatever its Notes say.

$ErrorActionPreference = 'Stop'

$script:OwnerBlock = '```hyperfleet'
$script:TemplateBlock = '```hyperfleet-template'

function New-HFError([string]$Class, [string]$Message) {
    $e = New-Object System.Exception ($Message)
    $e.Data['HFClass'] = $Class
    return $e
}

function ConvertFrom-HFInput([string]$InputBase64) {
    $json = [System.Text.Encoding]::UTF8.GetString([System.Convert]::FromBase64String($InputBase64))
    return (ConvertFrom-Json -InputObject $json)
}

# Invoke-HFOperation runs one operation and writes its envelope. The body returns a hashtable (never
# a bare array, which the pipeline would unwrap) as its last output; anything a cmdlet wrote
# before it is dropped.
function Invoke-HFOperation([scriptblock]$Body) {
    try {
        $out = @(& $Body)
        $data = $null
        if ($out.Count -gt 0) { $data = $out[$out.Count - 1] }
        ConvertTo-Json -InputObject @{ Ok = $true; Data = $data } -Depth 5 -Compress
    } catch {
        $ex = $_.Exception
        $class = 'Failed'
        if ($ex.Data.Contains('HFClass')) {
            $class = [string]$ex.Data['HFClass']
        } else {
            switch ($_.CategoryInfo.Category.ToString()) {
                'ObjectNotFound'   { $class = 'NotFound' }
                'ResourceExists'   { $class = 'AlreadyExists' }
                'ResourceBusy'     { $class = 'Busy' }
                'InvalidOperation' { $class = 'Busy' }
                'PermissionDenied' { $class = 'Forbidden' }
                'InvalidArgument'  { $class = 'Invalid' }
                'InvalidData'      { $class = 'Invalid' }
                'NotImplemented'   { $class = 'Unsupported' }
            }
        }
        ConvertTo-Json -InputObject @{ Ok = $false; Class = $class; Message = [string]$ex.Message } -Compress
    }
}

# Get-HFBlock parses the last fenced block opened by $Marker in a VM's Notes into a hashtable.
function Get-HFBlock([string]$Notes, [string]$Marker) {
    $kv = @{}
    if (-not $Notes) { return $kv }
    $text = $Notes -replace "`r`n", "`n"
    $open = $Marker + "`n"
    $start = $text.LastIndexOf($open)
    if ($start -lt 0) { return $kv }
    $body = $text.Substring($start + $open.Length)
    $end = $body.IndexOf('```')
    if ($end -ge 0) { $body = $body.Substring(0, $end) }
    foreach ($line in $body.Split("`n")) {
        $i = $line.IndexOf(':')
        if ($i -gt 0) { $kv[$line.Substring(0, $i).Trim()] = $line.Substring($i + 1).Trim() }
    }
    return $kv
}

function Test-HFTemplate($VM) {
    return ([string]$VM.Notes).Contains($script:TemplateBlock + "`n") -or ([string]$VM.Notes).Contains($script:TemplateBlock + "`r`n")
}

# Test-HFOwned reports whether the VM's Notes name the expected installation and owner (and claim,
# when the caller knows it).
function Test-HFOwned($VM, $Expect) {
    if (Test-HFTemplate $VM) { return $false }
    $kv = Get-HFBlock ([string]$VM.Notes) $script:OwnerBlock
    if ($kv['managed-by'] -ne 'hyperfleet') { return $false }
    if (-not $Expect.Installation -or $kv['installation'] -ne $Expect.Installation) { return $false }
    if (-not $Expect.OwnerTag -or $kv['owner-tag'] -ne $Expect.OwnerTag) { return $false }
    if ($Expect.ClaimID -and $kv['claim-id'] -ne $Expect.ClaimID) { return $false }
    return $true
}

function Get-HFVMById([string]$Id) {
    $vm = Get-VM -Id $Id -ErrorAction SilentlyContinue
    if (-not $vm) { throw (New-HFError 'NotFound' "VM $Id does not exist on $env:COMPUTERNAME") }
    return $vm
}

function Get-HFOwnedVM($In) {
    $vm = Get-HFVMById $In.Id
    if (-not (Test-HFOwned $vm $In.Expect)) {
        throw (New-HFError 'NotOwned' "VM $($In.Id) ($($vm.Name)) does not carry this HyperFleet installation's ownership block in its Notes; it is left alone")
    }
    return $vm
}

function ConvertTo-HFVM($VM) {
    $ips = @()
    $macs = @()
    $switch = ''
    $vlan = 0
    foreach ($a in @(Get-VMNetworkAdapter -VM $VM)) {
        if ($a.IPAddresses) { $ips += @($a.IPAddresses) }
        if ($a.MacAddress) { $macs += [string]$a.MacAddress }
        if (-not $switch -and $a.SwitchName) {
            $switch = [string]$a.SwitchName
            $v = Get-VMNetworkAdapterVlan -VMNetworkAdapter $a
            if ($v -and $v.AccessVlanId) { $vlan = [int]$v.AccessVlanId }
        }
    }
    $dvds = @()
    foreach ($d in @(Get-VMDvdDrive -VM $VM)) {
        if ($d.Path) { $dvds += [string]$d.Path }
    }
    $disks = @()
    foreach ($d in @(Get-VMHardDiskDrive -VM $VM)) {
        if ($d.Path) { $disks += [string]$d.Path }
    }
    return @{
        Id                  = $VM.Id.ToString()
        Name                = [string]$VM.Name
        State               = [int]$VM.State
        Notes               = [string]$VM.Notes
        Generation          = [int]$VM.Generation
        ProcessorCount      = [int]$VM.ProcessorCount
        MemoryStartupBytes  = [int64]$VM.MemoryStartup
        MemoryAssignedBytes = [int64]$VM.MemoryAssigned
        UptimeSeconds       = [int64]$VM.Uptime.TotalSeconds
        CreationTime        = $VM.CreationTime.ToUniversalTime().ToString('o')
        IPAddresses         = @($ips)
        MacAddresses        = @($macs)
        SwitchName          = $switch
        VlanId              = $vlan
        DvdPaths            = @($dvds)
        HardDiskPaths       = @($disks)
        Merging             = (Test-HFMerging $VM)
        Migrating           = (([string]$VM.Status) -like 'Migrating*')
    }
}

# Test-HFMerging reports whether Hyper-V is merging a removed checkpoint's differencing disk into
# its parent, which it does in the background after Remove-VMSnapshot; Get-VM's Status says
# "Merging disks" meanwhile.
function Test-HFMerging($VM) {
    return ([string]$VM.Status) -like 'Merging*'
}

# Get-HFInventory: the host's capacity and every VM on it, in one call (for placement and the sweep).
function Get-HFInventory([string]$InputBase64) {
    Invoke-HFOperation {
        $h = Get-VMHost
        $os = Get-CimInstance -ClassName Win32_OperatingSystem
        $vms = @()
        foreach ($vm in @(Get-VM)) { $vms += (ConvertTo-HFVM $vm) }
        return @{
            Host = @{
                Name              = [string]$env:COMPUTERNAME
                Version           = [string]$os.Version
                LogicalProcessors = [int]$h.LogicalProcessorCount
                MemoryBytes       = [int64]$h.MemoryCapacity
                FreeMemoryBytes   = [int64]$os.FreePhysicalMemory * 1024
            }
            VMs  = @($vms)
        }
    }
}

# Get-HFVM: one VM by Id; read-only, so no ownership check.
function Get-HFVM([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        return @{ VM = (ConvertTo-HFVM (Get-HFVMById $in.Id)) }
    }
}

# Find-HFTemplate: templates named Name ('*' for every template VM), either VMs whose Notes carry a
# ```hyperfleet-template block with that name, or the file <TemplateDirectory>\<Name>.vhdx.
function Find-HFTemplate([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $found = @()
        foreach ($vm in @(Get-VM)) {
            if (-not (Test-HFTemplate $vm)) { continue }
            $kv = Get-HFBlock ([string]$vm.Notes) $script:TemplateBlock
            if ($in.Name -ne '*' -and $kv['name'] -ne $in.Name) { continue }
            $disk = @(Get-VMHardDiskDrive -VM $vm | Where-Object { $_.Path } | Select-Object -First 1)
            if ($disk.Count -eq 0) { continue }
            $vhd = Get-VHD -Path $disk[0].Path
            $found += @{
                Kind = 'VM'; Id = $vm.Id.ToString(); Name = [string]$in.Name; Tags = [string]$kv['tags']
                VHDPath = [string]$vhd.Path; SizeBytes = [int64]$vhd.Size
                ProcessorCount = [int]$vm.ProcessorCount; MemoryStartupBytes = [int64]$vm.MemoryStartup
            }
        }
        if ($in.TemplateDirectory -and $in.Name -ne '*') {
            $path = Join-Path $in.TemplateDirectory ($in.Name + '.vhdx')
            if (Test-Path -LiteralPath $path) {
                $vhd = Get-VHD -Path $path
                $found += @{
                    Kind = 'VHDX'; Id = ''; Name = [string]$in.Name; Tags = ''
                    VHDPath = [string]$vhd.Path; SizeBytes = [int64]$vhd.Size
                    ProcessorCount = 0; MemoryStartupBytes = 0
                }
            }
        }
        return @{ Templates = @($found) }
    }
}

function Set-HFNetwork($VM, $In) {
    if (-not $In.SwitchName) { return }
    $adapter = @(Get-VMNetworkAdapter -VM $VM)
    if ($adapter.Count -eq 0) {
        Add-VMNetworkAdapter -VM $VM -SwitchName $In.SwitchName
        $adapter = @(Get-VMNetworkAdapter -VM $VM)
    }
    Connect-VMNetworkAdapter -VMNetworkAdapter $adapter[0] -SwitchName $In.SwitchName
    if ([int]$In.VlanId -gt 0) {
        Set-VMNetworkAdapterVlan -VMNetworkAdapter $adapter[0] -Access -VlanId ([int]$In.VlanId)
    } else {
        Set-VMNetworkAdapterVlan -VMNetworkAdapter $adapter[0] -Untagged
    }
}

# Expand-HFSeed unpacks the gzip-compressed seed HyperFleet uploaded (an ISO is mostly zeros, and
# every uploaded byte costs command lines), checks it against the SHA-256 HyperFleet computed and
# removes the archive.
function Expand-HFSeed([string]$Archive, [string]$Destination, [string]$Sha256) {
    if (-not (Test-Path -LiteralPath $Archive)) {
        throw (New-HFError 'NotFound' "seed archive $Archive does not exist on $env:COMPUTERNAME")
    }
    $source = [System.IO.File]::OpenRead($Archive)
    try {
        $gz = New-Object System.IO.Compression.GZipStream($source, [System.IO.Compression.CompressionMode]::Decompress)
        $target = [System.IO.File]::Create($Destination)
        try { $gz.CopyTo($target) } finally { $target.Dispose(); $gz.Dispose() }
    } finally { $source.Dispose() }
    Remove-Item -LiteralPath $Archive -Force
    $sum = (Get-FileHash -LiteralPath $Destination -Algorithm SHA256).Hash.ToLowerInvariant()
    if ($sum -ne $Sha256) {
        Remove-Item -LiteralPath $Destination -Force
        throw (New-HFError 'Invalid' "seed $Destination has SHA-256 $sum, not $Sha256")
    }
}

function Set-HFHardware($VM, $In) {
    if ([int]$In.Cores -gt 0) { Set-VMProcessor -VM $VM -Count ([int]$In.Cores) }
    if ([int64]$In.MemoryMiB -gt 0) {
        Set-VMMemory -VM $VM -DynamicMemoryEnabled $false -StartupBytes ([int64]$In.MemoryMiB * 1MB)
    }
    Set-HFNetwork $VM $In
}

# New-HFVM: a generation 2 VM on the template's VHDX: on a differencing disk on it (Hyper-V's
# linked clone), or with Full on a copy of it (Add-HFFullCopy) in the folder of the directory
# storage Storage (Get-HFStorageFolder) or in VHDDirectory; then CPU, memory, switch and VLAN, and
# the Notes with the ownership block. A VM of that name already carrying this claim's ownership is
# returned as it is, so a retry after a lost answer finds the VM it made (the VM ID exists only
# once Hyper-V assigns it); one whose copy was cut short gets it now. Other VMs of the same name
# are left alone (Hyper-V allows duplicate names); the disk's name is the claim's own, or the VM's.
function New-HFVM([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        if (-not $in.Expect.ClaimID) { throw (New-HFError 'Invalid' 'a clone needs the claim ID it is made for') }
        $made = $null
        foreach ($vm in @(Get-VM -Name $in.Name -ErrorAction SilentlyContinue)) {
            if (Test-HFOwned $vm $in.Expect) { $made = $vm; break }
        }
        if ($made -and -not ($in.Full -and @(Get-VMHardDiskDrive -VM $made).Count -eq 0)) {
            return @{ Created = $false; VM = (ConvertTo-HFVM $made) }
        }
        if (-not (Test-Path -LiteralPath $in.ParentPath)) {
            throw (New-HFError 'NotFound' "template disk $($in.ParentPath) does not exist on $env:COMPUTERNAME")
        }
        if ($in.Full) {
            $folder = $in.VHDDirectory
            if ($in.Storage) { $folder = Get-HFStorageFolder $in ([string]$in.Storage) }
            if ($made) {
                Add-HFFullCopy $made $in.ParentPath $folder
                return @{ Created = $false; VM = (ConvertTo-HFVM (Get-VM -Id $made.Id)) }
            }
            $vm = $null
            try {
                $vm = New-VM -Name $in.Name -Generation 2 -MemoryStartupBytes ([int64]$in.MemoryMiB * 1MB) -NoVHD -Path $in.VMDirectory
                Set-HFNewVM $vm $in
                Add-HFFullCopy $vm $in.ParentPath $folder
            } catch {
                if ($vm) { Remove-VM -VM $vm -Force -ErrorAction SilentlyContinue }
                throw
            }
            return @{ Created = $true; VM = (ConvertTo-HFVM (Get-VM -Id $vm.Id)) }
        }
        $child = Join-Path $in.VHDDirectory $in.DiskName
        if (Test-Path -LiteralPath $child) {
            # Left by a clone of this claim interrupted before New-VM, unless a VM uses it.
            if (@(Get-VM | Get-VMHardDiskDrive | Where-Object { $_.Path -eq $child }).Count -gt 0) {
                throw (New-HFError 'AlreadyExists' "disk $child is in use by another VM")
            }
            Remove-Item -LiteralPath $child -Force
        }
        New-VHD -Path $child -ParentPath $in.ParentPath -Differencing | Out-Null
        $vm = $null
        try {
            $vm = New-VM -Name $in.Name -Generation 2 -MemoryStartupBytes ([int64]$in.MemoryMiB * 1MB) -VHDPath $child -Path $in.VMDirectory
            Set-HFNewVM $vm $in
        } catch {
            if ($vm) { Remove-VM -VM $vm -Force -ErrorAction SilentlyContinue }
            Remove-Item -LiteralPath $child -Force -ErrorAction SilentlyContinue
            throw
        }
        return @{ Created = $true; VM = (ConvertTo-HFVM (Get-VM -Id $vm.Id)) }
    }
}

# Set-HFNewVM gives a VM New-HFVM just made its Notes first, so a retry finds it, then its hardware
# and Secure Boot.
function Set-HFNewVM($VM, $In) {
    Set-VM -VM $VM -Notes $In.Notes -AutomaticStartAction Nothing -AutomaticStopAction TurnOff
    Set-HFHardware $VM $In
    if ($In.SecureBootTemplate -eq 'Off') {
        Set-VMFirmware -VM $VM -EnableSecureBoot Off
    } elseif ($In.SecureBootTemplate) {
        Set-VMFirmware -VM $VM -EnableSecureBoot On -SecureBootTemplate $In.SecureBootTemplate
    }
}

# Add-HFFullCopy copies the template's disk into Folder as the VM's own boot disk (Get-HFBootDiskFile,
# so Remove-HFVM knows it wherever it is) at SCSI 0:0, first to boot. A copy a call cut short left
# is made again; a failed copy is not left behind.
function Add-HFFullCopy($VM, [string]$ParentPath, [string]$Folder) {
    $copy = Join-Path $Folder (Get-HFBootDiskFile $VM)
    try {
        if (Test-Path -LiteralPath $copy) { Remove-Item -LiteralPath $copy -Force }
        Copy-Item -LiteralPath $ParentPath -Destination $copy
        $drive = Add-VMHardDiskDrive -VM $VM -ControllerType SCSI -ControllerNumber 0 -ControllerLocation 0 -Path $copy -Passthru
        Set-VMFirmware -VM $VM -FirstBootDevice $drive
    } catch {
        Remove-Item -LiteralPath $copy -Force -ErrorAction SilentlyContinue
        throw
    }
}

# Set-HFVM: hardware, network, Notes, disk growth and the seed ISO of an owned VM that is off.
function Set-HFVM([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        Assert-HFNotMoving $vm
        if ([int]$vm.State -ne 3) {
            throw (New-HFError 'Busy' "VM $($in.Id) is not off (state $([int]$vm.State)); it is configured only while off")
        }
        Set-HFHardware $vm $in
        if ($in.Notes) { Set-VM -VM $vm -Notes $in.Notes }
        if ([int64]$in.DiskSizeBytes -gt 0) {
            $disk = @(Get-VMHardDiskDrive -VM $vm | Where-Object { $_.Path } | Select-Object -First 1)
            if ($disk.Count -gt 0) {
                $vhd = Get-VHD -Path $disk[0].Path
                if ([int64]$vhd.Size -lt [int64]$in.DiskSizeBytes) { Resize-VHD -Path $vhd.Path -SizeBytes ([int64]$in.DiskSizeBytes) }
            }
        }
        if ($in.SeedArchivePath) { Expand-HFSeed $in.SeedArchivePath $in.SeedPath $in.SeedSHA256 }
        if ($in.SeedPath) {
            if (-not (Test-Path -LiteralPath $in.SeedPath)) {
                throw (New-HFError 'NotFound' "seed ISO $($in.SeedPath) does not exist on $env:COMPUTERNAME")
            }
            $dvd = @(Get-VMDvdDrive -VM $vm)
            if ($dvd.Count -gt 0) {
                Set-VMDvdDrive -VMDvdDrive $dvd[0] -Path $in.SeedPath
            } else {
                Add-VMDvdDrive -VM $vm -Path $in.SeedPath
            }
        }
        return @{ VM = (ConvertTo-HFVM (Get-VM -Id $vm.Id)) }
    }
}

function Start-HFVM([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        Assert-HFNotMoving $vm
        if ([int]$vm.State -ne 2) { Start-VM -VM $vm }
        return @{ VM = (ConvertTo-HFVM (Get-VM -Id $vm.Id)) }
    }
}

# Stop-HFVM: Mode TurnOff pulls the power (Stop-VM -TurnOff); Mode Shutdown asks the guest through
# the shutdown integration service and returns at once, where Stop-VM would wait for the guest.
function Stop-HFVM([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        Assert-HFNotMoving $vm
        if ([int]$vm.State -eq 3) { return @{ VM = (ConvertTo-HFVM $vm) } }
        if ($in.Mode -eq 'TurnOff') {
            Stop-VM -VM $vm -TurnOff -Force
        } elseif ($in.Mode -eq 'Shutdown') {
            $sc = Get-CimInstance -Namespace 'root\virtualization\v2' -ClassName Msvm_ShutdownComponent -Filter "SystemName='$($vm.Id.ToString())'"
            if (-not $sc) { throw (New-HFError 'Busy' "VM $($in.Id) has no running shutdown integration service") }
            $r = Invoke-CimMethod -InputObject $sc -MethodName InitiateShutdown -Arguments @{ Force = $true; Reason = 'HyperFleet' }
            if ([int]$r.ReturnValue -ne 0) { throw (New-HFError 'Busy' "the guest of VM $($in.Id) refused to shut down (code $([int]$r.ReturnValue))") }
        } else {
            throw (New-HFError 'Invalid' "unknown stop mode '$($in.Mode)'")
        }
        return @{ VM = (ConvertTo-HFVM (Get-VM -Id $vm.Id)) }
    }
}

# Remove-HFVM: an owned VM that is off, with its differencing disks, its full copy and extra disks
# (the files named by its GUID, Get-HFBootDiskFile and Get-HFDiskFile, in whatever folder or
# storage they are) and its seed ISO. Base disks (a template's) are never
# deleted, nor other disks attached to it, nor ISOs outside the seed directory.
function Remove-HFVM([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        Assert-HFNotMoving $vm
        if ([int]$vm.State -ne 3) {
            throw (New-HFError 'Busy' "VM $($in.Id) is not off (state $([int]$vm.State)); stop it before deleting it")
        }
        # Checkpoints first: removing them merges their disks back into the VM's own differencing
        # disk in the background, and only that disk is HyperFleet's to delete. The caller retries.
        Assert-HFNotMerging $vm
        $checkpoints = @(Get-VMSnapshot -VM $vm)
        if ($checkpoints.Count -gt 0) {
            $checkpoints | Remove-VMSnapshot -Confirm:$false
            throw (New-HFError 'Busy' "VM $($in.Id) had $($checkpoints.Count) checkpoints; they are being merged, delete it again once that is done")
        }
        $files = @()
        foreach ($d in @(Get-VMHardDiskDrive -VM $vm)) {
            if (-not $d.Path) { continue }
            if ((Test-HFDiskOfVM $vm $d.Path) -or (Get-VHD -Path $d.Path).VhdType.ToString() -eq 'Differencing') { $files += [string]$d.Path }
        }
        # A disk a call cut short left unattached (an extra disk before Add-VMHardDiskDrive, a full
        # copy before it was attached) is the VM's too, unless another VM uses it: looked for in
        # the VHD folder and in the folders of the caller's storages (StorageIndex).
        $folders = @()
        if ($in.VHDDirectory) { $folders += [string]$in.VHDDirectory }
        if ($in.StorageIndex -and $in.Expect.OwnerTag -and (Test-Path -LiteralPath $in.StorageIndex -PathType Container)) {
            foreach ($ix in @(Get-ChildItem -LiteralPath $in.StorageIndex -Filter ($in.Expect.OwnerTag + '.*.json'))) {
                # A record that cannot be read names no folder; it does not stop the deletion.
                $def = $null
                try { $def = Get-HFStorageIndex $ix.FullName } catch { }
                if ($def -and $def.Path) { $folders += [string]$def.Path }
            }
        }
        $loose = @()
        foreach ($dir in $folders) {
            if (-not (Test-Path -LiteralPath $dir -PathType Container)) { continue }
            foreach ($name in @((Get-HFDiskFile $vm '*'), (Get-HFBootDiskFile $vm))) {
                $loose += @(Get-ChildItem -LiteralPath $dir -Filter $name |
                    Where-Object { -not ($files -contains $_.FullName) -and -not ($loose -contains $_.FullName) } | ForEach-Object { [string]$_.FullName })
            }
        }
        if ($loose.Count -gt 0) {
            $inUse = @(Get-VM | Where-Object { $_.Id -ne $vm.Id } | Get-VMHardDiskDrive | ForEach-Object { [string]$_.Path })
            foreach ($f in $loose) { if (-not ($inUse -contains $f)) { $files += $f } }
        }
        $seedDir = ([string]$in.SeedDirectory).TrimEnd('\') + '\'
        foreach ($d in @(Get-VMDvdDrive -VM $vm)) {
            if ($d.Path -and ([string]$d.Path).StartsWith($seedDir, [System.StringComparison]::OrdinalIgnoreCase)) { $files += [string]$d.Path }
        }
        foreach ($f in @($in.SeedPath, ($in.SeedPath + '.gz'))) {
            if ($in.SeedPath -and (Test-Path -LiteralPath $f) -and -not ($files -contains $f)) { $files += [string]$f }
        }
        Remove-VM -VM $vm -Force
        foreach ($f in $files) { Remove-Item -LiteralPath $f -Force -ErrorAction SilentlyContinue }
        return @{ Removed = @($files) }
    }
}

# Dismount-HFSeed: ejects the seed ISO from the VM's DVD drive (allowed while it runs) and deletes it.
function Dismount-HFSeed([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        Assert-HFNotMoving $vm
        foreach ($d in @(Get-VMDvdDrive -VM $vm)) {
            if ($d.Path -and ([string]$d.Path) -eq $in.SeedPath) { Set-VMDvdDrive -VMDvdDrive $d -Path $null }
        }
        $removed = $false
        foreach ($f in @($in.SeedPath, ($in.SeedPath + '.gz'))) {
            if (Test-Path -LiteralPath $f) {
                Remove-Item -LiteralPath $f -Force
                $removed = $true
            }
        }
        return @{ Removed = $removed }
    }
}

# Extra disks and network adapters. A generation 2 VM has SCSI disks and synthetic adapters only;
# HyperFleet refuses what has no Hyper-V equivalent before it calls these.

# Get-HFDiskFile is the file name of a VM's extra disk: named by the VM's GUID and the disk's name,
# so it is unique per VM and disk, a retry finds it on the VM, and Remove-HFVM knows it for the
# VM's own.
function Get-HFDiskFile($VM, [string]$Name) {
    return 'hyperfleet-' + $VM.Id.ToString().ToLowerInvariant() + '-' + $Name + '.vhdx'
}

# Get-HFBootDiskFile is the file name of a full clone's copy of its template's disk: named by the
# VM's GUID alone, so no extra disk's name can take it.
function Get-HFBootDiskFile($VM) {
    return 'hyperfleet-' + $VM.Id.ToString().ToLowerInvariant() + '.vhdx'
}

# Test-HFDiskOfVM reports whether the file is named as the VM's full copy or one of its extra disks.
function Test-HFDiskOfVM($VM, [string]$Path) {
    $leaf = Split-Path -Leaf $Path
    if ($leaf -eq (Get-HFBootDiskFile $VM)) { return $true }
    return $leaf.StartsWith('hyperfleet-' + $VM.Id.ToString() + '-', [System.StringComparison]::OrdinalIgnoreCase) -and
        $leaf.EndsWith('.vhdx', [System.StringComparison]::OrdinalIgnoreCase)
}

# Get-HFConfigurableVM: an owned VM that is off and not moving.
function Get-HFConfigurableVM($In) {
    $vm = Get-HFOwnedVM $In
    Assert-HFNotMoving $vm
    if ([int]$vm.State -ne 3) {
        throw (New-HFError 'Busy' "VM $($In.Id) is not off (state $([int]$vm.State)); it is configured only while off")
    }
    return $vm
}

# Add-HFDisks: the extra disks an owned VM that is off lacks. Each is a new dynamic VHDX
# (Get-HFDiskFile) in the folder of the directory storage it names (Get-HFStorageFolder), or in
# VHDDirectory, on SCSI controller 0 at its Lun. Every storage is found before a disk is made, so
# an unknown one makes nothing. A disk whose file the VM already has is left as it is (never
# resized or replaced, wherever it is), so a retry adds nothing. A file of that name that no VM
# uses was left by a call cut short before Add-VMHardDiskDrive, and is made again.
function Add-HFDisks([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFConfigurableVM $in
        $todo = @()
        $folders = @{}
        $drives = @(Get-VMHardDiskDrive -VM $vm) + @(Get-VMDvdDrive -VM $vm)
        foreach ($d in @($in.Disks)) {
            if ([string]$d.Name -cnotmatch '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') { throw (New-HFError 'Invalid' "disk name '$($d.Name)' is not a lowercase DNS label") }
            $file = Get-HFDiskFile $vm $d.Name
            if (@($drives | Where-Object { $_.Path -and (Split-Path -Leaf $_.Path) -eq $file }).Count -gt 0) { continue }
            $folder = $in.VHDDirectory
            if ($d.Storage) {
                if (-not $folders.ContainsKey([string]$d.Storage)) { $folders[[string]$d.Storage] = Get-HFStorageFolder $in ([string]$d.Storage) }
                $folder = $folders[[string]$d.Storage]
            }
            $todo += @{ Disk = $d; Path = (Join-Path $folder $file) }
        }
        $added = @()
        foreach ($t in $todo) {
            $d = $t.Disk
            $path = $t.Path
            $drives = @(Get-VMHardDiskDrive -VM $vm) + @(Get-VMDvdDrive -VM $vm)
            $taken = @($drives | Where-Object { [int]$_.ControllerNumber -eq 0 -and [int]$_.ControllerLocation -eq [int]$d.Lun })
            if ($taken.Count -gt 0) {
                throw (New-HFError 'Invalid' "SCSI location 0:$($d.Lun) of VM $($in.Id), where disk $($d.Name) goes, holds $($taken[0].Path)")
            }
            if (Test-Path -LiteralPath $path) {
                if (@(Get-VM | Get-VMHardDiskDrive | Where-Object { $_.Path -eq $path }).Count -gt 0) {
                    throw (New-HFError 'AlreadyExists' "disk $path is in use by another VM")
                }
                Remove-Item -LiteralPath $path -Force
            }
            New-VHD -Path $path -SizeBytes ([int64]$d.SizeBytes) -Dynamic | Out-Null
            try {
                Add-VMHardDiskDrive -VM $vm -ControllerType SCSI -ControllerNumber 0 -ControllerLocation ([int]$d.Lun) -Path $path
            } catch {
                Remove-Item -LiteralPath $path -Force -ErrorAction SilentlyContinue
                throw
            }
            $added += $path
        }
        return @{ Added = @($added); VM = (ConvertTo-HFVM (Get-VM -Id $vm.Id)) }
    }
}

# Set-HFAdapters gives an owned VM that is off exactly the adapters listed, in order. An adapter
# already carrying a listed MAC is that one; the VM's other adapters are reused in their order
# (the first one a new VM has) and the rest of the list added; adapters left over are removed.
# Each gets its name, static MAC and switch, and its VLAN in access mode (untagged without one).
# Every switch is checked first, so an unknown one changes nothing.
function Set-HFAdapters([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFConfigurableVM $in
        $want = @($in.Adapters)
        $switches = @(Get-VMSwitch | ForEach-Object { [string]$_.Name })
        foreach ($n in $want) {
            if (-not ($switches -contains [string]$n.SwitchName)) {
                throw (New-HFError 'Invalid' "virtual switch '$($n.SwitchName)' of adapter $($n.Name) does not exist on $env:COMPUTERNAME (its switches: $($switches -join ', '))")
            }
        }
        $have = @(Get-VMNetworkAdapter -VM $vm)
        $match = @{}
        $used = @{}
        for ($i = 0; $i -lt $want.Count; $i++) {
            for ($j = 0; $j -lt $have.Count; $j++) {
                if (-not $used[$j] -and [string]$have[$j].MacAddress -eq [string]$want[$i].MacAddress) { $match[$i] = $have[$j]; $used[$j] = $true; break }
            }
        }
        $free = @()
        for ($j = 0; $j -lt $have.Count; $j++) { if (-not $used[$j]) { $free += $have[$j] } }
        $k = 0
        for ($i = 0; $i -lt $want.Count; $i++) {
            $n = $want[$i]
            $a = $match[$i]
            if (-not $a -and $k -lt $free.Count) { $a = $free[$k]; $k++ }
            if ($a) {
                Set-VMNetworkAdapter -VMNetworkAdapter $a -StaticMacAddress $n.MacAddress
                if ([string]$a.Name -cne [string]$n.Name) { Rename-VMNetworkAdapter -VMNetworkAdapter $a -NewName $n.Name }
                Connect-VMNetworkAdapter -VMNetworkAdapter $a -SwitchName $n.SwitchName
            } else {
                $a = Add-VMNetworkAdapter -VM $vm -Name $n.Name -SwitchName $n.SwitchName -StaticMacAddress $n.MacAddress -Passthru
            }
            if ([int]$n.VlanId -gt 0) {
                Set-VMNetworkAdapterVlan -VMNetworkAdapter $a -Access -VlanId ([int]$n.VlanId)
            } else {
                Set-VMNetworkAdapterVlan -VMNetworkAdapter $a -Untagged
            }
        }
        for (; $k -lt $free.Count; $k++) { Remove-VMNetworkAdapter -VMNetworkAdapter $free[$k] }
        return @{ VM = (ConvertTo-HFVM (Get-VM -Id $vm.Id)) }
    }
}

# Checkpoints. Hyper-V lets two checkpoints of a VM share a name; HyperFleet does not: New-HFCheckpoint
# refuses a name the VM already has, and the other functions resolve the name to exactly one
# checkpoint, refuse a name two checkpoints share (an operator made another one by hand) and act on
# that checkpoint object, found by its Id. Every function proves the VM is ours first.

function ConvertTo-HFCheckpoint($S) {
    $parent = ''
    if ($S.ParentSnapshotName) { $parent = [string]$S.ParentSnapshotName }
    return @{
        Id           = $S.Id.ToString()
        Name         = [string]$S.Name
        Parent       = $parent
        CreationTime = $S.CreationTime.ToUniversalTime().ToString('o')
        SnapshotType = [string]$S.SnapshotType
        # A standard checkpoint of a running VM holds its memory (saved state); any other
        # checkpoint holds the disks and the configuration only.
        State        = [int]$S.State
    }
}

function Get-HFCheckpointByName($VM, [string]$Name) {
    $found = @(Get-VMSnapshot -VM $VM | Where-Object { $_.Name -ceq $Name })
    if ($found.Count -eq 0) { throw (New-HFError 'NotFound' "checkpoint '$Name' does not exist on VM $($VM.Id)") }
    if ($found.Count -gt 1) {
        throw (New-HFError 'Ambiguous' "$($found.Count) checkpoints of VM $($VM.Id) are named '$Name'; HyperFleet acts on none of them")
    }
    return $found[0]
}

# Assert-HFNotMoving refuses to change a VM while it moves to another host.
function Assert-HFNotMoving($VM) {
    if (([string]$VM.Status) -like 'Migrating*') {
        throw (New-HFError 'Busy' "VM $($VM.Id) is being moved to another host; try again when the move is done")
    }
}

function Assert-HFNotMerging($VM) {
    if (Test-HFMerging $VM) {
        throw (New-HFError 'Busy' "VM $($VM.Id) is merging a removed checkpoint's disk; try again when the merge is done")
    }
}

# Get-HFCheckpoints: an owned VM's checkpoints, oldest first, and whether a merge runs.
function Get-HFCheckpoints([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        $list = @()
        foreach ($s in @(Get-VMSnapshot -VM $vm | Sort-Object CreationTime)) { $list += (ConvertTo-HFCheckpoint $s) }
        return @{ Checkpoints = @($list); Merging = (Test-HFMerging $vm) }
    }
}

# New-HFCheckpoint: WithMemory takes a standard checkpoint (disks, configuration and, for a running
# VM, its memory); without it a production checkpoint (the guest's own backup service quiesces
# its file systems, no memory), ProductionOnly so that a guest without that service fails the call
# instead of falling back to a standard checkpoint with memory. The VM's own checkpoint type is
# put back afterwards; a VM whose checkpoints an operator disabled is refused.
function New-HFCheckpoint([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        Assert-HFNotMoving $vm
        $previous = [string]$vm.CheckpointType
        if ($previous -eq 'Disabled') {
            throw (New-HFError 'Invalid' "checkpoints are disabled on VM $($in.Id) ($($vm.Name)): its CheckpointType is Disabled")
        }
        Assert-HFNotMerging $vm
        if (@(Get-VMSnapshot -VM $vm | Where-Object { $_.Name -ceq $in.Name }).Count -gt 0) {
            throw (New-HFError 'AlreadyExists' "checkpoint name '$($in.Name)' already used on VM $($in.Id)")
        }
        $type = 'ProductionOnly'
        if ($in.WithMemory) { $type = 'Standard' }
        Set-VM -VM $vm -CheckpointType $type
        try {
            Checkpoint-VM -VM $vm -SnapshotName $in.Name
        } finally {
            Set-VM -VM $vm -CheckpointType $previous
        }
        return @{ Checkpoint = (ConvertTo-HFCheckpoint (Get-HFCheckpointByName $vm $in.Name)) }
    }
}

# Restore-HFCheckpoint applies a checkpoint. Hyper-V leaves the VM Off after a checkpoint without
# memory and Saved after one with memory; HyperFleet starts it again when Start is set, and always
# after a checkpoint with memory, so that it resumes where it was.
function Restore-HFCheckpoint([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        Assert-HFNotMoving $vm
        Assert-HFNotMerging $vm
        $s = Get-HFCheckpointByName $vm $in.Name
        Restore-VMSnapshot -VMSnapshot $s -Confirm:$false
        $vm = Get-VM -Id $vm.Id
        if ($in.Start -or [int]$vm.State -eq 6) { Start-VM -VM $vm }
        return @{ VM = (ConvertTo-HFVM (Get-VM -Id $vm.Id)) }
    }
}

# Remove-HFCheckpoint removes one checkpoint (its children move up to its parent). Hyper-V merges
# the checkpoint's differencing disk in the background; Merging says whether that runs.
function Remove-HFCheckpoint([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        Assert-HFNotMoving $vm
        Assert-HFNotMerging $vm
        $s = Get-HFCheckpointByName $vm $in.Name
        Remove-VMSnapshot -VMSnapshot $s -Confirm:$false
        return @{ Merging = (Test-HFMerging (Get-VM -Id $vm.Id)) }
    }
}

# Moves. Move-VM is synchronous, and a WinRM call has no way to cancel what it started, so a move
# runs as the host's own migration job: Start-HFMove starts Move-VM -AsJob, waits until the
# Virtual Machine Management Service has created the Msvm_MigrationJob for the VM and returns that
# job's InstanceID. The job belongs to the host, not to the PowerShell session (a PowerShell job,
# Get-Job, would end with this call's shell), so later calls read it (Get-HFMove) and stop it
# (Stop-HFMove, RequestStateChange Terminate) by that ID. Hyper-V keeps the VM running on the source
# until the final switch-over; a job stopped before then leaves it there, and a job past that point
# is no longer Cancellable and finishes.

$script:VirtNamespace = 'root\virtualization\v2'

function Get-HFMigrationJob([string]$InstanceId) {
    return @(Get-CimInstance -Namespace $script:VirtNamespace -ClassName Msvm_MigrationJob |
        Where-Object { $_.InstanceID -eq $InstanceId }) | Select-Object -First 1
}

# Get-HFMoveProblems is Compare-VM against one destination: the incompatibilities Hyper-V reports,
# or the error that kept it from comparing (migration not enabled there, the host unreachable).
function Get-HFMoveProblems($VM, [string]$Destination, [bool]$IncludeStorage, [string]$StoragePath) {
    $problems = @()
    try {
        if ($IncludeStorage) {
            $report = Compare-VM -VM $VM -DestinationHost $Destination -IncludeStorage -DestinationStoragePath $StoragePath
        } else {
            $report = Compare-VM -VM $VM -DestinationHost $Destination
        }
        foreach ($i in @($report.Incompatibilities)) { $problems += [string]$i.Message }
    } catch {
        $problems += [string]$_.Exception.Message
    }
    return @($problems)
}

# Test-HFMove: whether an owned VM could move to each of Hosts with its storage, and which of its
# disks are on storage only this host has (not an SMB share or a cluster shared volume).
function Test-HFMove([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        $local = @()
        foreach ($d in @(Get-VMHardDiskDrive -VM $vm)) {
            $p = [string]$d.Path
            if ($p -and -not $p.StartsWith('\\') -and -not $p.StartsWith($env:SystemDrive + '\ClusterStorage\', [System.StringComparison]::OrdinalIgnoreCase)) { $local += $p }
        }
        $hosts = @()
        foreach ($h in @($in.Hosts)) {
            $hosts += @{ Name = [string]$h; Problems = @(Get-HFMoveProblems $vm $h $true $in.DestinationStoragePath) }
        }
        return @{ Running = ([int]$vm.State -eq 2); LocalDisks = @($local); Hosts = @($hosts) }
    }
}

# Start-HFMove: checks the destination with Compare-VM, then starts the move and returns the
# migration job's InstanceID (empty when the move was already done by the time it looked).
function Start-HFMove([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        Assert-HFNotMoving $vm
        Assert-HFNotMerging $vm
        if ([int]$vm.State -eq 2 -and -not $in.Online) {
            throw (New-HFError 'Invalid' "VM $($in.Id) is running; a running VM moves live only (Online)")
        }
        $problems = @(Get-HFMoveProblems $vm $in.Target ([bool]$in.IncludeStorage) $in.DestinationStoragePath)
        if ($problems.Count -gt 0) {
            throw (New-HFError 'Invalid' ("VM $($in.Id) cannot move to $($in.Target): " + ($problems -join ' ')))
        }
        $id = $vm.Id.ToString()
        if ($in.IncludeStorage) {
            $job = Move-VM -VM $vm -DestinationHost $in.Target -IncludeStorage -DestinationStoragePath $in.DestinationStoragePath -AsJob
        } else {
            $job = Move-VM -VM $vm -DestinationHost $in.Target -AsJob
        }
        $deadline = (Get-Date).AddSeconds(30)
        while ((Get-Date) -lt $deadline) {
            $mj = @(Get-CimInstance -Namespace $script:VirtNamespace -ClassName Msvm_MigrationJob |
                Where-Object { $_.VirtualSystemName -eq $id -and [int]$_.JobState -lt 7 })
            if ($mj.Count -gt 0) { return @{ JobId = [string]$mj[0].InstanceID } }
            if ($job.State -eq 'Failed') { Receive-Job -Job $job -ErrorAction Stop }
            if ($job.State -eq 'Completed') { return @{ JobId = '' } }
            Start-Sleep -Milliseconds 200
        }
        throw (New-HFError 'Failed' "the move of VM $id to $($in.Target) did not start within 30 seconds")
    }
}

# Get-HFMove: a migration job's state (CIM_ConcreteJob JobState: 7 Completed, 8 Terminated,
# 9 Killed, 10 Exception; below 7 it runs). Read-only: the VM may have left this host.
function Get-HFMove([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $mj = Get-HFMigrationJob $in.JobId
        if (-not $mj) { return @{ Found = $false } }
        return @{
            Found = $true; JobState = [int]$mj.JobState; PercentComplete = [int]$mj.PercentComplete
            ErrorDescription = [string]$mj.ErrorDescription; Cancellable = [bool]$mj.Cancellable
        }
    }
}

# Stop-HFMove asks Hyper-V to stop an owned VM's migration job (RequestStateChange Terminate).
function Stop-HFMove([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        $mj = Get-HFMigrationJob $in.JobId
        if (-not $mj -or $mj.VirtualSystemName -ne $vm.Id.ToString()) {
            throw (New-HFError 'NotFound' "VM $($in.Id) has no migration job $($in.JobId) on $env:COMPUTERNAME")
        }
        if ([int]$mj.JobState -ge 7) { return @{ JobState = [int]$mj.JobState } }
        if (-not $mj.Cancellable) {
            throw (New-HFError 'Busy' "the move of VM $($in.Id) is past the point where Hyper-V can stop it; it finishes")
        }
        $r = Invoke-CimMethod -InputObject $mj -MethodName RequestStateChange -Arguments @{ RequestedState = [uint16]4 }
        if ([int]$r.ReturnValue -ne 0 -and [int]$r.ReturnValue -ne 4096) {
            throw (New-HFError 'Failed' "Hyper-V refused to stop the move of VM $($in.Id) (code $([int]$r.ReturnValue))")
        }
        return @{ JobState = [int](Get-HFMigrationJob $in.JobId).JobState }
    }
}

# Networks. An isolated network is an Internal virtual switch named after the network, marked in
# its Notes by a ```hyperfleet-network block (Test-HFMarked); the host's adapter on it
# ("vEthernet (<switch>)") takes each subnet's gateway, a WinNAT NetNat of the switch's name
# masquerades the subnet that asks for SNAT, and the DHCP Server role serves the subnets with a
# range, one scope each, named after the switch and described by the network's mark. Everything
# named after a marked switch is the network's; nothing is changed before the switch's mark and
# the scopes' descriptions are checked. A VLAN network lives on a switch HyperFleet does not own:
# it is only checked to exist.

function Test-HFMarked([string]$Text, [string]$Marker, $Owner) {
    $kv = Get-HFBlock $Text $Marker
    return ($kv['managed-by'] -eq 'hyperfleet') -and $Owner.Installation -and ($kv['installation'] -eq $Owner.Installation) -and
        $Owner.OwnerTag -and ($kv['owner-tag'] -eq $Owner.OwnerTag) -and ($kv['name'] -eq $Owner.Name)
}

# Assert-HFDhcpServer refuses, before anything changes, a host without the DHCP Server role's cmdlets.
function Assert-HFDhcpServer {
    if (-not (Get-Command -Name 'Add-DhcpServerv4Scope' -ErrorAction SilentlyContinue)) {
        throw (New-HFError 'Unsupported' "the DHCP Server role is not installed on $env:COMPUTERNAME (the term 'Add-DhcpServerv4Scope' is not recognized): install it (Install-WindowsFeature DHCP -IncludeManagementTools) or give the network's subnets no DHCP range")
    }
}

function Test-HFHasDhcpServer {
    return [bool](Get-Command -Name 'Get-DhcpServerv4Scope' -ErrorAction SilentlyContinue)
}

function Get-HFOwnedSwitch($In) {
    $sw = @(Get-VMSwitch -Name $In.SwitchName -ErrorAction SilentlyContinue)
    if ($sw.Count -eq 0) { return $null }
    if ($sw.Count -gt 1 -or -not (Test-HFMarked ([string]$sw[0].Notes) '```hyperfleet-network' $In.Owner)) {
        throw (New-HFError 'NotOwned' "virtual switch '$($In.SwitchName)' on $env:COMPUTERNAME does not carry this HyperFleet installation's mark for network $($In.Owner.Name) in its Notes; it is left alone")
    }
    return $sw[0]
}

# Get-HFNetworkScopes: the DHCP scopes named after the network, each proved the network's by its
# description before the caller changes any.
function Get-HFNetworkScopes($In) {
    $out = @()
    if (-not (Test-HFHasDhcpServer)) { return @($out) }
    foreach ($s in @(Get-DhcpServerv4Scope | Where-Object { [string]$_.Name -eq $In.SwitchName })) {
        if ([string]$s.Description -ne $In.ScopeDescription) {
            throw (New-HFError 'NotOwned' "DHCP scope $($s.ScopeId) ('$($s.Name)') on $env:COMPUTERNAME is not described as this installation's network $($In.Owner.Name); it is left alone")
        }
        $out += $s
    }
    return @($out)
}

# Set-HFVirtualNetwork makes the host match the network; Changed says whether anything changed.
function Set-HFVirtualNetwork([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        if ($in.Kind -eq 'VLAN') {
            if (@(Get-VMSwitch -Name $in.SwitchName -ErrorAction SilentlyContinue).Count -eq 0) {
                throw (New-HFError 'NotFound' "virtual switch '$($in.SwitchName)', the uplink of network $($in.Owner.Name), does not exist on $env:COMPUTERNAME")
            }
            return @{ Changed = $false }
        }
        $subnets = @($in.Subnets)
        if (@($subnets | Where-Object { $_.DhcpStart }).Count -gt 0) { Assert-HFDhcpServer }
        $changed = $false
        $sw = Get-HFOwnedSwitch $in
        $scopes = @(Get-HFNetworkScopes $in)
        if (-not $sw) {
            $sw = New-VMSwitch -Name $in.SwitchName -SwitchType Internal -Notes $in.Notes
            $changed = $true
        } elseif ([string]$sw.Notes -cne $in.Notes) {
            Set-VMSwitch -VMSwitch $sw -Notes $in.Notes
            $changed = $true
        }
        $alias = "vEthernet ($($in.SwitchName))"
        $want = @($subnets | Where-Object { $_.Gateway } | ForEach-Object { [string]$_.Gateway + '/' + [string]$_.PrefixLength })
        $have = @(Get-NetIPAddress -InterfaceAlias $alias -AddressFamily IPv4 -ErrorAction SilentlyContinue | Where-Object { [string]$_.PrefixOrigin -eq 'Manual' })
        foreach ($a in $have) {
            if (-not ($want -contains ([string]$a.IPAddress + '/' + [string]$a.PrefixLength))) { Remove-NetIPAddress -InputObject $a -Confirm:$false; $changed = $true }
        }
        $haveText = @($have | ForEach-Object { [string]$_.IPAddress + '/' + [string]$_.PrefixLength })
        foreach ($s in @($subnets | Where-Object { $_.Gateway })) {
            if (-not ($haveText -contains ([string]$s.Gateway + '/' + [string]$s.PrefixLength))) {
                New-NetIPAddress -InterfaceAlias $alias -IPAddress $s.Gateway -PrefixLength ([int]$s.PrefixLength) | Out-Null
                $changed = $true
            }
        }
        $natPrefix = @($subnets | Where-Object { $_.Nat } | ForEach-Object { [string]$_.Prefix })
        $nat = Get-NetNat -Name $in.SwitchName -ErrorAction SilentlyContinue
        if ($nat -and ($natPrefix.Count -eq 0 -or [string]$nat.InternalIPInterfaceAddressPrefix -ne $natPrefix[0])) {
            Remove-NetNat -Name $in.SwitchName -Confirm:$false
            $nat = $null
            $changed = $true
        }
        if (-not $nat -and $natPrefix.Count -gt 0) {
            New-NetNat -Name $in.SwitchName -InternalIPInterfaceAddressPrefix $natPrefix[0] | Out-Null
            $changed = $true
        }
        $wantScopes = @($subnets | Where-Object { $_.DhcpStart } | ForEach-Object { [string]$_.NetworkAddress })
        foreach ($sc in $scopes) {
            if (-not ($wantScopes -contains $sc.ScopeId.ToString())) { Remove-DhcpServerv4Scope -ScopeId $sc.ScopeId -Force; $changed = $true }
        }
        foreach ($s in @($subnets | Where-Object { $_.DhcpStart })) {
            $sc = Get-DhcpServerv4Scope -ScopeId $s.NetworkAddress -ErrorAction SilentlyContinue
            if ($sc -and [string]$sc.Description -ne $in.ScopeDescription) {
                throw (New-HFError 'NotOwned' "DHCP scope $($s.NetworkAddress) on $env:COMPUTERNAME ('$($sc.Name)') is not this installation's network $($in.Owner.Name); it is left alone")
            }
            if ($sc -and [string]$sc.SubnetMask -ne $s.SubnetMask) {
                Remove-DhcpServerv4Scope -ScopeId $s.NetworkAddress -Force
                $sc = $null
            }
            if (-not $sc) {
                Add-DhcpServerv4Scope -Name $in.SwitchName -Description $in.ScopeDescription -StartRange $s.DhcpStart -EndRange $s.DhcpEnd -SubnetMask $s.SubnetMask -State Active
                $changed = $true
            } elseif ([string]$sc.StartRange -ne $s.DhcpStart -or [string]$sc.EndRange -ne $s.DhcpEnd) {
                Set-DhcpServerv4Scope -ScopeId $s.NetworkAddress -StartRange $s.DhcpStart -EndRange $s.DhcpEnd
                $changed = $true
            }
            foreach ($o in @(@{ Id = 3; Value = [string]$s.Gateway }, @{ Id = 6; Value = [string]$s.DnsServer })) {
                $cur = Get-DhcpServerv4OptionValue -ScopeId $s.NetworkAddress -OptionId $o.Id -ErrorAction SilentlyContinue
                $curValue = ''
                if ($cur) { $curValue = (@($cur.Value) -join ',') }
                if ($curValue -eq $o.Value) { continue }
                if (-not $o.Value) {
                    Remove-DhcpServerv4OptionValue -ScopeId $s.NetworkAddress -OptionId $o.Id
                } elseif ($o.Id -eq 3) {
                    Set-DhcpServerv4OptionValue -ScopeId $s.NetworkAddress -Router $o.Value
                } else {
                    # -Force: the resolver need not answer the host's validation query.
                    Set-DhcpServerv4OptionValue -ScopeId $s.NetworkAddress -DnsServer $o.Value -Force
                }
                $changed = $true
            }
        }
        return @{ Changed = $changed }
    }
}

# Remove-HFVirtualNetwork removes what Set-HFVirtualNetwork made: the NetNat, the scopes, the host
# adapter's addresses and last the switch, whose mark proves the rest the network's; a retry after
# a failure finds the mark again. A switch VMs are still connected to is refused: Remove-VMSwitch
# would cut them off.
function Remove-HFVirtualNetwork([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $sw = Get-HFOwnedSwitch $in
        $scopes = @(Get-HFNetworkScopes $in)
        $removed = @()
        if ($sw) {
            $users = @(Get-VMNetworkAdapter -All | Where-Object { -not $_.IsManagementOs -and [string]$_.SwitchName -eq $in.SwitchName } | ForEach-Object { [string]$_.VMName } | Sort-Object -Unique)
            if ($users.Count -gt 0) {
                throw (New-HFError 'Busy' "virtual switch '$($in.SwitchName)' on $env:COMPUTERNAME still connects the network adapters of VMs $($users -join ', '); it is removed once none is connected")
            }
            if (Get-NetNat -Name $in.SwitchName -ErrorAction SilentlyContinue) { Remove-NetNat -Name $in.SwitchName -Confirm:$false; $removed += 'NetNat' }
        }
        foreach ($sc in $scopes) { Remove-DhcpServerv4Scope -ScopeId $sc.ScopeId -Force; $removed += 'DhcpScope ' + $sc.ScopeId.ToString() }
        if ($sw) {
            Get-NetIPAddress -InterfaceAlias "vEthernet ($($in.SwitchName))" -AddressFamily IPv4 -ErrorAction SilentlyContinue |
                Where-Object { [string]$_.PrefixOrigin -eq 'Manual' } | Remove-NetIPAddress -Confirm:$false
            Remove-VMSwitch -VMSwitch $sw -Force
            $removed += 'VMSwitch'
        }
        return @{ Removed = @($removed) }
    }
}

# Set-HFReservation reserves IPAddress for ClientId (a MAC) in the network's scope holding it, or
# with Remove drops that reservation. A host without the DHCP role or a subnet without a scope
# has nothing to reserve in: Reserved is false. A reservation for the address or the client that
# is not described as the network's is left alone (NotOwned, or AlreadyExists for another client).
function Set-HFReservation([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $ip = [System.Net.IPAddress]::Parse($in.IPAddress)
        $scope = $null
        foreach ($sc in @(Get-HFNetworkScopes $in)) {
            $mask = [System.Net.IPAddress]::Parse([string]$sc.SubnetMask)
            if (($ip.Address -band $mask.Address) -eq ([System.Net.IPAddress]::Parse($sc.ScopeId.ToString())).Address) { $scope = $sc }
        }
        if (-not $scope) { return @{ Reserved = $false } }
        $client = ([string]$in.ClientId).Replace(':', '-').ToLowerInvariant()
        $mine = @(Get-DhcpServerv4Reservation -ScopeId $scope.ScopeId | Where-Object {
                [string]$_.IPAddress -eq $in.IPAddress -or ([string]$_.ClientId).Replace(':', '-').ToLowerInvariant() -eq $client })
        foreach ($r in $mine) {
            $same = [string]$r.IPAddress -eq $in.IPAddress -and ([string]$r.ClientId).Replace(':', '-').ToLowerInvariant() -eq $client
            if ($same -and -not $in.Remove -and [string]$r.Description -eq $in.ScopeDescription) { return @{ Reserved = $true } }
            if ([string]$r.Description -ne $in.ScopeDescription) {
                if ($in.Remove -and -not $same) { continue }
                throw (New-HFError 'NotOwned' "DHCP reservation of $($r.IPAddress) for $($r.ClientId) in scope $($scope.ScopeId) on $env:COMPUTERNAME is not this installation's network $($in.Owner.Name); it is left alone")
            }
            if ($in.Remove -and -not $same) { continue }
            Remove-DhcpServerv4Reservation -ScopeId $scope.ScopeId -ClientId $r.ClientId
        }
        if ($in.Remove) { return @{ Reserved = $false } }
        Add-DhcpServerv4Reservation -ScopeId $scope.ScopeId -IPAddress $in.IPAddress -ClientId $client -Description $in.ScopeDescription
        return @{ Reserved = $true }
    }
}

# Set-HFPortPolicy gives one network adapter of an owned VM exactly the extended port ACLs listed
# and its bandwidth cap (bits per second, 0 for none). The ACLs are compared first and replaced
# only when they differ, so a retried configuration adds none twice; every extended ACL on an
# owned VM's adapter is HyperFleet's. Each ACL travels as one line,
# Action|Direction|RemoteIPAddress|LocalPort|RemotePort|Protocol|Weight|Stateful (empty for ANY,
# Stateful 1 or 0), so that a whole list fits a command line.
function ConvertFrom-HFAcl([string]$Text) {
    $f = $Text.Split('|')
    return [pscustomobject]@{
        Action = $f[0]; Direction = $f[1]; RemoteIPAddress = $f[2]; LocalPort = $f[3]; RemotePort = $f[4]; Protocol = $f[5]
        Weight = [int]$f[6]; Stateful = ($f[7] -eq '1')
    }
}

function ConvertTo-HFAclKey($A) {
    $parts = foreach ($v in @($A.Action, $A.Direction, $A.RemoteIPAddress, $A.LocalPort, $A.RemotePort, $A.Protocol)) {
        $t = [string]$v
        if (-not $t -or $t -eq 'ANY') { 'any' } else { $t.ToLowerInvariant() }
    }
    return ($parts -join '|') + '|' + [string][int]$A.Weight + '|' + [string][bool]$A.Stateful
}

function Set-HFPortPolicy([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $vm = Get-HFOwnedVM $in
        $a = @(Get-VMNetworkAdapter -VM $vm | Where-Object { [string]$_.MacAddress -eq $in.MacAddress })
        if ($a.Count -eq 0) { throw (New-HFError 'NotFound' "VM $($in.Id) has no network adapter with MAC $($in.MacAddress)") }
        $a = $a[0]
        $changed = $false
        $have = @(Get-VMNetworkAdapterExtendedAcl -VMNetworkAdapter $a)
        $want = @(@($in.Acls) | ForEach-Object { ConvertFrom-HFAcl $_ })
        $haveKeys = @($have | ForEach-Object { ConvertTo-HFAclKey $_ } | Sort-Object)
        $wantKeys = @($want | ForEach-Object { ConvertTo-HFAclKey $_ } | Sort-Object)
        if (($haveKeys -join ';') -ne ($wantKeys -join ';')) {
            foreach ($x in $have) { Remove-VMNetworkAdapterExtendedAcl -InputObject $x }
            foreach ($x in $want) {
                $p = @{ VMNetworkAdapter = $a; Action = $x.Action; Direction = $x.Direction; Weight = [int]$x.Weight }
                if ($x.RemoteIPAddress) { $p.RemoteIPAddress = $x.RemoteIPAddress }
                if ($x.LocalPort) { $p.LocalPort = $x.LocalPort }
                if ($x.RemotePort) { $p.RemotePort = $x.RemotePort }
                if ($x.Protocol) { $p.Protocol = $x.Protocol }
                if ($x.Stateful) { $p.Stateful = $true }
                Add-VMNetworkAdapterExtendedAcl @p
            }
            $changed = $true
        }
        if ([int64]$a.BandwidthSetting.MaximumBandwidth -ne [int64]$in.MaximumBandwidth) {
            Set-VMNetworkAdapter -VMNetworkAdapter $a -MaximumBandwidth ([int64]$in.MaximumBandwidth)
            $changed = $true
        }
        return @{ Changed = $changed }
    }
}

# Storages. A directory storage is a folder on a host volume. HyperFleet records each storage it
# defines or adopts in its own index, a file per storage named by the owner and the storage's name
# (IndexPath), so it finds the folder again by name; a folder it creates carries its mark in a file
# of its own, .hyperfleet-owner. An adopted folder is only checked to exist, never written to.

$script:StorageMarker = '.hyperfleet-owner'

function Get-HFStorageIndex([string]$Path) {
    if (-not (Test-Path -LiteralPath $Path -PathType Leaf)) { return $null }
    return (Get-Content -LiteralPath $Path -Raw | ConvertFrom-Json)
}

# Get-HFStorageFolder is the folder of the directory storage Name that a VM's disk goes to, as the
# host's storage index (In.StorageIndex) records it for the caller's owner (In.Expect.OwnerTag):
# the record Set-HFStorage wrote. A storage the host does not record, or whose folder is gone, is
# NotFound.
function Get-HFStorageFolder($In, [string]$Name) {
    if ($Name -cnotmatch '^[a-z][a-z0-9_.-]{0,61}[a-z0-9]$') { throw (New-HFError 'Invalid' "'$Name' is not a storage name") }
    if (-not $In.StorageIndex -or -not $In.Expect.OwnerTag) { throw (New-HFError 'Invalid' "storage $Name is named without the storage index and owner to find it in") }
    $def = Get-HFStorageIndex (Join-Path $In.StorageIndex ($In.Expect.OwnerTag + '.' + $Name + '.json'))
    if (-not $def) {
        throw (New-HFError 'NotFound' "storage $Name is not defined on $env:COMPUTERNAME: this HypervisorCluster's storage index ($($In.StorageIndex)) has no record of it; a VMStorage defines or adopts it")
    }
    if (-not (Test-Path -LiteralPath $def.Path -PathType Container)) {
        throw (New-HFError 'NotFound' "folder $($def.Path) of storage $Name does not exist on $env:COMPUTERNAME")
    }
    return [string]$def.Path
}

function Test-HFStorageMarked([string]$Folder, $Owner) {
    $marker = Join-Path $Folder $script:StorageMarker
    if (-not (Test-Path -LiteralPath $marker -PathType Leaf)) { return $false }
    return (Test-HFMarked (Get-Content -LiteralPath $marker -Raw) '```hyperfleet-storage' $Owner)
}

# Set-HFStorage creates the folder with its mark (or, to adopt, checks it exists) and records it.
function Set-HFStorage([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $def = Get-HFStorageIndex $in.IndexPath
        if ($def -and [string]$def.Path -ne $in.Path) {
            throw (New-HFError 'AlreadyExists' "storage $($in.Owner.Name) already names folder $($def.Path) on $env:COMPUTERNAME, not $($in.Path)")
        }
        $changed = $false
        if ($in.Adopt) {
            if (-not (Test-Path -LiteralPath $in.Path -PathType Container)) {
                throw (New-HFError 'NotFound' "folder $($in.Path) does not exist on $env:COMPUTERNAME: an adopted storage must exist")
            }
        } elseif (Test-Path -LiteralPath $in.Path) {
            if (-not (Test-HFStorageMarked $in.Path $in.Owner)) {
                throw (New-HFError 'NotOwned' "folder $($in.Path) on $env:COMPUTERNAME exists without this HyperFleet installation's mark ($($script:StorageMarker)); it is left alone (adopt it to use it as it is)")
            }
        } else {
            New-Item -ItemType Directory -Path $in.Path | Out-Null
            Set-Content -LiteralPath (Join-Path $in.Path $script:StorageMarker) -Value $in.Marker -Encoding UTF8
            $changed = $true
        }
        if (-not $def) {
            New-Item -ItemType Directory -Force -Path (Split-Path -Parent $in.IndexPath) | Out-Null
            Set-Content -LiteralPath $in.IndexPath -Value (ConvertTo-Json -InputObject @{ Path = $in.Path; Adopted = [bool]$in.Adopt } -Compress) -Encoding UTF8
            $changed = $true
        }
        return @{ Changed = $changed }
    }
}

# Remove-HFStorage forgets a storage and removes the folder HyperFleet created, only when it holds
# nothing but its mark: data is never deleted. An adopted folder stays as it is.
function Remove-HFStorage([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $def = Get-HFStorageIndex $in.IndexPath
        if (-not $def) { return @{ Removed = $false } }
        $folder = [string]$def.Path
        if (-not $def.Adopted -and (Test-Path -LiteralPath $folder -PathType Container)) {
            $items = @(Get-ChildItem -LiteralPath $folder -Force)
            $marked = Test-HFStorageMarked $folder $in.Owner
            # An empty folder is one a removal cut short after taking the mark away.
            if (-not $marked -and $items.Count -gt 0) {
                throw (New-HFError 'NotOwned' "folder $folder on $env:COMPUTERNAME does not carry this HyperFleet installation's mark ($($script:StorageMarker)); it is left alone")
            }
            $data = @($items | Where-Object { $_.Name -ne $script:StorageMarker } | ForEach-Object { [string]$_.Name })
            if ($data.Count -gt 0) {
                throw (New-HFError 'Busy' "folder $folder on $env:COMPUTERNAME still holds $($data.Count) items ($(($data | Select-Object -First 5) -join ', ')); HyperFleet deletes no data: move or delete them, then delete the storage again")
            }
            if ($marked) { Remove-Item -LiteralPath (Join-Path $folder $script:StorageMarker) -Force }
            Remove-Item -LiteralPath $folder
        }
        Remove-Item -LiteralPath $in.IndexPath -Force
        return @{ Removed = $true }
    }
}

# Get-HFStorage reads a recorded storage's folder and the size of the volume it is on.
function Get-HFStorage([string]$InputBase64) {
    Invoke-HFOperation {
        $in = ConvertFrom-HFInput $InputBase64
        $def = Get-HFStorageIndex $in.IndexPath
        if (-not $def) { return @{ Defined = $false } }
        $out = @{ Defined = $true; Path = [string]$def.Path; Adopted = [bool]$def.Adopted; Active = $false; SizeBytes = 0; RemainingBytes = 0 }
        if (Test-Path -LiteralPath $def.Path -PathType Container) {
            $v = Get-Volume -FilePath $def.Path
            $out.Active = $true
            $out.SizeBytes = [int64]$v.Size
            $out.RemainingBytes = [int64]$v.SizeRemaining
        }
        return $out
    }
}

Export-ModuleMember -Function Get-HFInventory, Get-HFVM, Find-HFTemplate, New-HFVM, Set-HFVM, Start-HFVM, Stop-HFVM, Remove-HFVM, Dismount-HFSeed, Add-HFDisks, Set-HFAdapters, Get-HFCheckpoints, New-HFCheckpoint, Restore-HFCheckpoint, Remove-HFCheckpoint, Test-HFMove, Start-HFMove, Get-HFMove, Stop-HFMove, Set-HFVirtualNetwork, Remove-HFVirtualNetwork, Set-HFReservation, Set-HFPortPolicy, Set-HFStorage, Remove-HFStorage, Get-HFStorage
