"""Pure decisions: functions from observed facts to a plan. No I/O, no Ansible."""
