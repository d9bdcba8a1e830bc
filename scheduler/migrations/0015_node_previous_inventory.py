"""Node.previous_inventory and Node.inventory_changed_at: a node that registers other resources than
before keeps what it had, for the Nodes page and the dashboard (issue 23)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("scheduler", "0014_time_limits_and_estimates"),
    ]

    operations = [
        migrations.AddField(
            model_name="node",
            name="previous_inventory",
            field=models.JSONField(
                blank=True, null=True,
                help_text="What it registered before its inventory last changed: gpu_type, gpu_count, cpu, memory_gib.",
            ),
        ),
        migrations.AddField(
            model_name="node",
            name="inventory_changed_at",
            field=models.DateTimeField(blank=True, null=True, help_text="When it registered other resources."),
        ),
    ]
