"""The paper's claims against every run and number that answers them: the joint claims table
(joint), the groups' claims (groups), the evidence table (evidence) and the findings page
(findings)."""
