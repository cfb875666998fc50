"""Write-behind: archival inserts (``archival_journal``) and recall indexing (``recall_writer``)
done off the turn path, with durable journals so a crash loses nothing."""
