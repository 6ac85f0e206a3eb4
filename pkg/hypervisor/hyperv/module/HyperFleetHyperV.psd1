@{
    RootModule        = 'HyperFleetHyperV.psm1'
    ModuleVersion     = '1.5.0'
    GUID              = '6f1d3c2a-8e4b-4f0e-9a57-2b1c7d9e4a10'
    Author            = 'HyperFleet'
    Description       = 'Hyper-V operations HyperFleet runs on each host over WinRM. Deployed and replaced by HyperFleet; do not edit.'
    PowerShellVersion = '5.1'
    RequiredModules   = @('Hyper-V')
    FunctionsToExport = @(
        'Get-HFInventory',
        'Get-HFVM',
        'Find-HFTemplate',
        'New-HFVM',
        'Set-HFVM',
        'Start-HFVM',
        'Stop-HFVM',
        'Remove-HFVM',
        'Dismount-HFSeed',
        'Add-HFDisks',
        'Set-HFAdapters',
        'Get-HFCheckpoints',
        'New-HFCheckpoint',
        'Restore-HFCheckpoint',
        'Remove-HFCheckpoint',
        'Test-HFMove',
        'Start-HFMove',
        'Get-HFMove',
        'Stop-HFMove',
        'Set-HFVirtualNetwork',
        'Remove-HFVirtualNetwork',
        'Set-HFReservation',
        'Set-HFPortPolicy',
        'Set-HFStorage',
        'Remove-HFStorage',
        'Get-HFStorage'
    )
    CmdletsToExport   = @()
    VariablesToExport = @()
    AliasesToExport   = @()
}
